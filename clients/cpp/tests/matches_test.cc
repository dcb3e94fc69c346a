// How many matches Run plays, against a scripted in-process server that offers two matches
// in one session and then ends it with OK: by default (Options::matches 0) the bot plays on
// after a MatchEnd, sends no Leave and Run returns 0 when the server ends the session;
// matches N > 0 sends Leave when the N-th match starts and returns after its MatchEnd.
// OptionsFromEnv reads GAIGEL_MATCHES as the Rust and Java kits do (unset, empty or 0:
// until the server ends the session; N: leave after N; anything else: a configuration error
// naming the variable and the value, and Run returns 1). Run by ctest.
#include <grpcpp/grpcpp.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "gaigel/client.h"
#include "gaigel/v1/bot_service.grpc.pb.h"
#include "scripted.h"

namespace v1 = gaigel::v1;
using gaigel_test::Check;

namespace {

// Welcome, then two matches of one decision each (MatchStart, DecisionRequest, MatchEnd),
// then the end of the session (OK), as `gaigel try` and the arena end it. It does not stop
// at a Leave: a bot that leaves must stop reading by itself.
class TwoMatchServer final : public v1::BotService::Service {
 public:
  int leave_in_match = 0;  // the match (1 or 2) during which Leave arrived; 0: none
  int answers = 0;
  bool session_ended = false;  // the server got to the end of its script

  grpc::Status Play(grpc::ServerContext*,
                    grpc::ServerReaderWriter<v1::PlayResponse, v1::PlayRequest>* stream) override {
    v1::PlayRequest req;
    if (!stream->Read(&req) || !req.has_join()) return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "no Join");
    uint64_t seq = 0;
    auto send = [&](v1::PlayResponse msg) {
      msg.set_sequence(seq++);
      return stream->Write(msg);
    };
    v1::PlayResponse msg;
    msg.mutable_welcome()->set_session_id("s");
    send(msg);
    for (int match = 1; match <= 2; ++match) {
      const std::string id = "m" + std::to_string(match);
      msg.Clear();
      msg.mutable_match_start()->set_match_id(id);
      if (!send(msg)) return grpc::Status::OK;
      msg.Clear();
      msg.mutable_decision_request()->set_decision_id(id + "d");
      msg.mutable_decision_request()->add_legal_actions()->set_id(3);
      if (!send(msg)) return grpc::Status::OK;
      for (;;) {  // a Leave perhaps, then the answer
        if (!stream->Read(&req)) return grpc::Status::OK;  // the bot went away
        if (req.has_leave() && leave_in_match == 0) leave_in_match = match;
        if (req.has_action()) break;
      }
      ++answers;
      msg.Clear();
      msg.mutable_match_end()->set_match_id(id);
      if (!send(msg)) return grpc::Status::OK;
    }
    session_ended = true;
    return grpc::Status::OK;
  }
};

class CountBot : public gaigel::Bot {
 public:
  std::vector<std::string> ended;
  int Decide(const v1::DecisionRequest& r) override { return r.legal_actions(0).id(); }
  void OnMatchEnd(const v1::MatchEnd& end) override { ended.push_back(end.match_id()); }
};

struct Outcome {
  int rc = -1;
  std::vector<std::string> ended;
  int leave_in_match = 0;
  bool session_ended = false;
};

Outcome Play(gaigel::Options options) {
  TwoMatchServer service;
  CountBot bot;
  options.connect_timeout = 2;
  Outcome out;
  out.rc = gaigel_test::RunAgainst(service, bot, options);
  out.ended = bot.ended;
  out.leave_in_match = service.leave_in_match;
  out.session_ended = service.session_ended;
  return out;
}

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ",") + x;
  return "[" + s + "]";
}

}  // namespace

int main() {
  // The default plays on after a MatchEnd until the server ends the session.
  Check(gaigel::Options{}.matches == 0, "Options::matches defaults to 0 (until the server ends the session)");
  Outcome all = Play(gaigel::Options{});
  Check(all.rc == 0, "default: Run returns 0 when the server ends the session, got " + std::to_string(all.rc));
  Check(all.ended == std::vector<std::string>{"m1", "m2"}, "default: both matches played, got " + Join(all.ended));
  Check(all.leave_in_match == 0, "default: no Leave, got one in match " + std::to_string(all.leave_in_match));
  Check(all.session_ended, "default: the server reached the end of the session");

  gaigel::Options one;
  one.matches = 1;
  Outcome first = Play(one);
  Check(first.rc == 0, "matches 1: Run returns 0");
  Check(first.ended == std::vector<std::string>{"m1"}, "matches 1: one match played, got " + Join(first.ended));
  Check(first.leave_in_match == 1, "matches 1: Leave in match 1, got " + std::to_string(first.leave_in_match));

  gaigel::Options two;
  two.matches = 2;
  Outcome both = Play(two);
  Check(both.rc == 0, "matches 2: Run returns 0");
  Check(both.ended == std::vector<std::string>{"m1", "m2"}, "matches 2: two matches played, got " + Join(both.ended));
  Check(both.leave_in_match == 2, "matches 2: Leave when match 2 starts, got " + std::to_string(both.leave_in_match));

  // GAIGEL_MATCHES values.
  Check(gaigel::MatchesFromEnv(nullptr) == 0, "GAIGEL_MATCHES unset: 0");
  Check(gaigel::MatchesFromEnv("") == 0, "GAIGEL_MATCHES empty: 0");
  Check(gaigel::MatchesFromEnv("0") == 0, "GAIGEL_MATCHES=0: 0");
  Check(gaigel::MatchesFromEnv("1") == 1, "GAIGEL_MATCHES=1: 1");
  Check(gaigel::MatchesFromEnv(" 12\n") == 12, "GAIGEL_MATCHES=' 12\\n': 12");
  Check(gaigel::MatchesFromEnv("99999999999999999999") > 1000000, "GAIGEL_MATCHES huge: capped, not an error");
  for (const char* v : {"abc", "-1", "1.5", "+1", "1 2", "one"})
    Check(gaigel::MatchesFromEnv(v) == -1, std::string("GAIGEL_MATCHES=") + v + ": an error");

  // OptionsFromEnv.
  unsetenv("GAIGEL_MATCHES");
  Check(gaigel::OptionsFromEnv().matches == 0, "OptionsFromEnv without GAIGEL_MATCHES: 0");
  Check(gaigel::OptionsFromEnv().config_error.empty(), "OptionsFromEnv without GAIGEL_MATCHES: no error");
  setenv("GAIGEL_MATCHES", "0", 1);
  Check(gaigel::OptionsFromEnv().matches == 0, "OptionsFromEnv with GAIGEL_MATCHES=0: 0");
  setenv("GAIGEL_MATCHES", "1", 1);
  Check(gaigel::OptionsFromEnv().matches == 1, "OptionsFromEnv with GAIGEL_MATCHES=1: 1");
  Check(gaigel::OptionsFromEnv().config_error.empty(), "OptionsFromEnv with GAIGEL_MATCHES=1: no error");
  gaigel::Options three;
  three.matches = 3;
  Check(gaigel::OptionsFromEnv(three).matches == 3, "OptionsFromEnv keeps a matches set in code");
  setenv("GAIGEL_MATCHES", "abc", 1);
  const gaigel::Options bad = gaigel::OptionsFromEnv();
  Check(bad.config_error == "GAIGEL_MATCHES must be a number, got \"abc\"",
        "OptionsFromEnv with GAIGEL_MATCHES=abc: the error names the variable and the value, got '" +
            bad.config_error + "'");
  Outcome refused = Play(bad);  // a server that would play: Run must not even join
  Check(refused.rc == 1, "Run with a bad GAIGEL_MATCHES returns 1, got " + std::to_string(refused.rc));
  Check(refused.ended.empty(), "Run with a bad GAIGEL_MATCHES plays no match, got " + Join(refused.ended));
  unsetenv("GAIGEL_MATCHES");

  return gaigel_test::Finish();
}
