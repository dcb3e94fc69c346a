// Compact mode against a scripted in-process server: a DecisionRequest carrying the ended
// hand's Event and HandEnd, a HandStart and two Events must reach the bot as the same
// callbacks, in the same order, as those messages sent on their own; Join.compact and
// Join.compact_hand_end follow Options::compact, and OptionsFromEnv reads GAIGEL_COMPACT as
// the Python SDK does. Run by ctest.
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

// Plays Welcome, MatchStart, one decision (folded or not) and MatchEnd.
class ScriptedServer final : public v1::BotService::Service {
 public:
  explicit ScriptedServer(bool folded) : folded_(folded) {}
  bool join_compact = false;
  bool join_compact_hand_end = false;

  grpc::Status Play(grpc::ServerContext*,
                    grpc::ServerReaderWriter<v1::PlayResponse, v1::PlayRequest>* stream) override {
    v1::PlayRequest req;
    if (!stream->Read(&req) || !req.has_join()) return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "no Join");
    join_compact = req.join().compact();
    join_compact_hand_end = req.join().compact_hand_end();
    uint64_t seq = 0;
    auto send = [&](v1::PlayResponse msg) {
      msg.set_sequence(seq++);
      stream->Write(msg);
    };
    v1::PlayResponse msg;
    msg.mutable_welcome()->set_session_id("s");
    send(msg);
    msg.Clear();
    msg.mutable_match_start()->set_match_id("m");
    send(msg);

    v1::Event trick;  // the last event of the hand before
    trick.set_hand_index(0);
    trick.mutable_trick_won()->set_winner_seat(2);
    v1::HandEnd hand_end;
    hand_end.set_hand_index(0);
    hand_end.add_winner_sides(0);
    v1::HandStart hand_start;
    hand_start.set_hand_index(1);
    hand_start.set_dealer_seat(1);
    v1::Event opening, played;
    opening.mutable_opening_declared()->set_seat(1);
    played.mutable_card_played()->set_seat(1);
    played.mutable_card_played()->set_face_down(true);
    v1::DecisionRequest request;
    request.set_decision_id("d1");
    request.add_legal_actions()->set_id(3);
    if (folded_) {
      *request.add_ended_hand_events() = trick;
      *request.mutable_hand_end() = hand_end;
      *request.mutable_hand_start() = hand_start;
      *request.add_events() = opening;
      *request.add_events() = played;
    } else {
      msg.Clear();
      *msg.mutable_event() = trick;
      send(msg);
      msg.Clear();
      *msg.mutable_hand_end() = hand_end;
      send(msg);
      msg.Clear();
      *msg.mutable_hand_start() = hand_start;
      send(msg);
      for (const auto& e : {opening, played}) {
        msg.Clear();
        *msg.mutable_event() = e;
        send(msg);
      }
    }
    msg.Clear();
    *msg.mutable_decision_request() = request;
    send(msg);
    while (stream->Read(&req) && !req.has_action()) {
    }  // the answer (a Leave first if Options::matches is 1)
    msg.Clear();
    msg.mutable_match_end()->set_match_id("m");
    send(msg);
    return grpc::Status::OK;
  }

 private:
  bool folded_;
};

// Writes down every callback.
class LogBot : public gaigel::Bot {
 public:
  std::vector<std::string> log;
  int Decide(const v1::DecisionRequest& r) override {
    log.push_back("Decide " + r.ShortDebugString());
    return r.legal_actions(0).id();
  }
  void OnMatchStart(const v1::MatchStart&) override { log.push_back("OnMatchStart"); }
  void OnHandStart(const v1::HandStart& h) override { log.push_back("OnHandStart " + h.ShortDebugString()); }
  void OnEvent(const v1::Event& e) override { log.push_back("OnEvent " + e.ShortDebugString()); }
  void OnHandEnd(const v1::HandEnd& h) override { log.push_back("OnHandEnd " + h.ShortDebugString()); }
  void OnMatchEnd(const v1::MatchEnd&) override { log.push_back("OnMatchEnd"); }
};

std::vector<std::string> Play(bool folded, bool compact, bool* join_compact, bool* join_compact_hand_end) {
  ScriptedServer service(folded);
  LogBot bot;
  gaigel::Options options;
  options.compact = compact;
  Check(gaigel_test::RunAgainst(service, bot, options) == 0, "Run returns 0");
  *join_compact = service.join_compact;
  *join_compact_hand_end = service.join_compact_hand_end;
  return bot.log;
}

}  // namespace

int main() {
  bool compact_join = false, plain_join = true, compact_hand_end_join = false, plain_hand_end_join = true;
  Check(gaigel::Options{}.compact, "Options::compact defaults to true");
  auto compact = Play(true, true, &compact_join, &compact_hand_end_join);
  auto plain = Play(false, false, &plain_join, &plain_hand_end_join);
  Check(compact_join, "Join.compact set by default");
  Check(compact_hand_end_join, "Join.compact_hand_end set by default");
  Check(!plain_join, "Join.compact unset with Options::compact = false");
  Check(!plain_hand_end_join, "Join.compact_hand_end unset with Options::compact = false");
  const std::vector<std::string> kinds = {"OnMatchStart", "OnEvent", "OnHandEnd", "OnHandStart", "OnEvent",
                                          "OnEvent",      "Decide",  "OnMatchEnd"};
  Check(compact.size() == kinds.size(), "eight callbacks in compact mode");
  for (size_t i = 0; i < kinds.size() && i < compact.size(); ++i)
    Check(compact[i].rfind(kinds[i], 0) == 0, "callback " + std::to_string(i) + " is " + kinds[i] + ": " + compact[i]);
  Check(compact.size() > 1 && compact[1].find("trick_won") != std::string::npos, "the ended hand's trick first");
  Check(compact.size() > 4 && compact[4].find("opening_declared") != std::string::npos, "then the opening");
  Check(compact.size() > 5 && compact[5].find("card_played") != std::string::npos, "then the card");
  Check(compact.size() > 6 && compact[6] == "Decide decision_id: \"d1\" legal_actions { id: 3 }",
        "Decide gets the request without the folded parts: " + (compact.size() > 6 ? compact[6] : ""));
  Check(compact == plain, "compact and plain mode give the same callbacks");

  // GAIGEL_COMPACT is read as the Python SDK reads it; a false Options::compact stays false.
  for (const char* v : {static_cast<const char*>(nullptr), "", "1", "true", "yes", "on", "maybe", "2"})
    Check(gaigel::CompactFromEnv(v), std::string("GAIGEL_COMPACT=") + (v ? v : "(unset)") + " means compact");
  for (const char* v : {"0", "false", "no", "off", "FALSE", " Off\n", "No"})
    Check(!gaigel::CompactFromEnv(v), std::string("GAIGEL_COMPACT=") + v + " means plain");
  setenv("GAIGEL_COMPACT", "off", 1);
  Check(!gaigel::OptionsFromEnv().compact, "OptionsFromEnv with GAIGEL_COMPACT=off: plain");
  setenv("GAIGEL_COMPACT", "1", 1);
  Check(gaigel::OptionsFromEnv().compact, "OptionsFromEnv with GAIGEL_COMPACT=1: compact");
  gaigel::Options plain_base;
  plain_base.compact = false;
  Check(!gaigel::OptionsFromEnv(plain_base).compact, "OptionsFromEnv keeps Options::compact = false");
  unsetenv("GAIGEL_COMPACT");
  Check(gaigel::OptionsFromEnv().compact, "OptionsFromEnv without GAIGEL_COMPACT: compact");
  for (const auto& line : compact) std::cout << line << "\n";
  return gaigel_test::Finish();
}
