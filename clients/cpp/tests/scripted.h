// What the kit's tests share: a failure counter with Check, and RunAgainst, which plays a
// bot against a scripted BotService on a free loopback port. Header-only; each test is one
// executable.
#ifndef GAIGEL_TESTS_SCRIPTED_H_
#define GAIGEL_TESTS_SCRIPTED_H_

#include <grpcpp/grpcpp.h>

#include <iostream>
#include <string>

#include "gaigel/client.h"

namespace gaigel_test {

inline int failures = 0;

inline void Check(bool ok, const std::string& what) {
  if (!ok) {
    std::cerr << "FAIL: " << what << "\n";
    ++failures;
  }
}

// Runs *bot* with *options* (its server, token "tok" and name "bob" filled in) against
// *service* on 127.0.0.1; Run's return code.
inline int RunAgainst(grpc::Service& service, gaigel::Bot& bot, gaigel::Options options) {
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  auto server = builder.BuildAndStart();
  options.server = "127.0.0.1:" + std::to_string(port);
  options.token = "tok";
  options.bot_name = "bob";
  const int rc = gaigel::Run(bot, options);
  server->Shutdown();
  return rc;
}

// main's last line: "ok" or "FAILED", and the exit code.
inline int Finish() {
  std::cout << (failures ? "FAILED" : "ok") << "\n";
  return failures ? 1 : 0;
}

}  // namespace gaigel_test

#endif  // GAIGEL_TESTS_SCRIPTED_H_
