// The session loop of the C++ kit; see include/gaigel/client.h.
#include "gaigel/client.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "gaigel/v1/bot_service.grpc.pb.h"

namespace gaigel {
namespace {

constexpr int kProtocolVersion = 1;

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

double Seconds(const google::protobuf::Duration& d) { return d.seconds() + d.nanos() / 1e9; }

struct MatchState {
  std::string match_id;
  int seat = 0;
  std::string resume_token;
  double grace = 0;  // seconds, 0 = unknown
};

class Session {
 public:
  Session(Bot& bot, const Options& opt)
      : bot_(bot),
        opt_(opt),
        stub_(v1::BotService::NewStub(grpc::CreateChannel(opt.server, grpc::InsecureChannelCredentials()))) {}

  int Run() {
    int failures = 0;
    auto lost_since = std::chrono::steady_clock::time_point();
    bool lost = false;
    std::mt19937 jitter(std::random_device{}());
    for (;;) {
      const bool resuming = in_match_;
      v1::PlayRequest first;
      if (resuming) {
        auto* r = first.mutable_resume();
        r->set_match_id(match_.match_id);
        r->set_seat(match_.seat);
        r->set_resume_token(match_.resume_token);
        r->set_last_sequence(last_sequence_);
        r->set_bot_version(opt_.bot_version);
      } else {
        last_sequence_ = 0;
        has_pending_ = false;
        auto* j = first.mutable_join();
        j->set_bot_token(opt_.token);
        j->set_bot_name(opt_.bot_name);
        j->set_bot_version(opt_.bot_version);
        j->set_protocol_version(kProtocolVersion);
        j->set_compact(opt_.compact);
        j->set_compact_hand_end(opt_.compact);
      }
      grpc::ClientContext ctx;
      stream_ = stub_->Play(&ctx);
      bool welcomed = false;
      bool done = false;
      if (stream_->Write(first)) {
        v1::PlayResponse msg;
        while (!done && stream_->Read(&msg)) {
          if (msg.has_welcome()) {
            welcomed = true;
            failures = 0;
            lost = false;
          }
          done = Handle(msg, resuming);
        }
      }
      if (done) {  // the last MatchEnd: close our side and stop
        stream_->WritesDone();
        ctx.TryCancel();
        stream_->Finish();
        return 0;
      }
      stream_->WritesDone();
      grpc::Status status = stream_->Finish();
      stream_.reset();
      if (status.ok()) {
        Log("the server ended the session");
        return 0;
      }
      const auto code = status.error_code();
      if (resuming && !welcomed &&
          (code == grpc::StatusCode::FAILED_PRECONDITION || code == grpc::StatusCode::NOT_FOUND)) {
        std::cerr << "gaigel: could not resume match " << match_.match_id << " (" << status.error_message()
                  << "); the match is over for us\n";
        in_match_ = false;
        if (++matches_done_ >= opt_.matches && opt_.matches > 0) return 0;
        continue;
      }
      const bool dropped = code == grpc::StatusCode::UNAVAILABLE ||
                           (in_match_ && (code == grpc::StatusCode::INTERNAL || code == grpc::StatusCode::UNKNOWN ||
                                          code == grpc::StatusCode::CANCELLED));
      if (!dropped) {
        std::cerr << "gaigel: the server ended the session with status " << code << ": " << status.error_message()
                  << "\n";
        return 1;
      }
      const auto now = std::chrono::steady_clock::now();
      if (!lost) {
        lost = true;
        lost_since = now;
      }
      const double limit = in_match_ && match_.grace > 0 ? match_.grace : opt_.connect_timeout;
      const double gone = std::chrono::duration<double>(now - lost_since).count();
      if (gone >= limit) {
        std::cerr << "gaigel: server unreachable for " << gone << " s (limit " << limit << " s): "
                  << status.error_message() << "\n";
        return 1;
      }
      double delay = std::min(opt_.max_backoff, opt_.initial_backoff * (1 << std::min(failures, 20)));
      delay *= std::uniform_real_distribution<double>(0.8, 1.2)(jitter);
      delay = std::min(delay, std::max(0.0, limit - gone));
      ++failures;
      Log(std::string("stream lost (") + status.error_message() + "); " + (in_match_ ? "resuming" : "reconnecting"));
      std::this_thread::sleep_for(std::chrono::duration<double>(delay));
    }
  }

 private:
  void Log(const std::string& text) const {
    if (opt_.verbose) std::cerr << "gaigel: " << text << "\n";
  }

  void Send(int action_id) {
    pending_answers_.push_back(action_id);
    v1::PlayRequest req;
    req.mutable_action()->set_decision_id(pending_.decision_id());
    req.mutable_action()->set_action_id(action_id);
    stream_->Write(req);
  }

  // Compact mode: passes the messages that rode in the request to the bot, in the order they
  // happened (the ended hand's Events and HandEnd, then HandStart and Events), and removes
  // them, so the bot sees exactly what it would have seen without compact mode. Does nothing
  // when nothing is folded. Called before the request counts as pending, as its own messages
  // would have come before it.
  void Unfold(v1::DecisionRequest& request) {
    for (const auto& event : request.ended_hand_events()) OnEvent(event);
    if (request.has_hand_end()) OnHandEnd(request.hand_end());
    if (request.has_hand_start()) OnHandStart(request.hand_start());
    for (const auto& event : request.events()) OnEvent(event);
    request.clear_ended_hand_events();
    request.clear_hand_end();
    request.clear_hand_start();
    request.clear_events();
  }

  // An Event, HandStart or HandEnd, on its own or folded: the previous decision is over.
  void OnEvent(const v1::Event& event) {
    has_pending_ = false;
    bot_.OnEvent(event);
  }
  void OnHandStart(const v1::HandStart& hand_start) {
    has_pending_ = false;
    bot_.OnHandStart(hand_start);
  }
  void OnHandEnd(const v1::HandEnd& hand_end) {
    has_pending_ = false;
    bot_.OnHandEnd(hand_end);
  }

  bool IsLegal(int id) const {
    for (const auto& a : pending_.legal_actions())
      if (a.id() == id) return true;
    return false;
  }

  // Handles one server message; true when the session is done.
  bool Handle(const v1::PlayResponse& msg, bool resuming) {
    if (msg.has_welcome()) {
      Log(std::string(msg.welcome().resumed() ? "resumed" : "joined") + " session " + msg.welcome().session_id());
      if (resuming && has_pending_) {
        // Our answer may have been lost with the old stream: send it (or a first one) again.
        int action = pending_answers_.empty() ? bot_.Decide(pending_) : pending_answers_.back();
        pending_answers_.clear();
        Send(action);
      }
      return false;
    }
    if (msg.sequence() <= last_sequence_) return false;  // resent after a Resume: already seen
    last_sequence_ = msg.sequence();
    switch (msg.message_case()) {
      case v1::PlayResponse::kDecisionRequest:
        pending_ = msg.decision_request();
        Unfold(pending_);
        has_pending_ = true;
        pending_answers_.clear();
        Send(bot_.Decide(pending_));
        break;
      case v1::PlayResponse::kActionRejected: {
        const auto& r = msg.action_rejected();
        std::cerr << "gaigel: action " << r.action_id() << " rejected (strike " << r.strikes() << " of limit "
                  << r.strikes_limit() << "): " << r.message() << "\n";
        bot_.OnRejected(r);
        if (!r.decision_open() || !has_pending_ || r.decision_id() != pending_.decision_id()) break;
        int action = pending_answers_.size() == 1 ? bot_.Decide(pending_) : -1;
        auto tried = [&](int id) {
          return std::find(pending_answers_.begin(), pending_answers_.end(), id) != pending_answers_.end();
        };
        if (!IsLegal(action) || tried(action)) {  // fall back to the first legal action not tried yet
          action = -1;
          for (const auto& a : pending_.legal_actions())
            if (!tried(a.id())) {
              action = a.id();
              break;
            }
        }
        if (action < 0) {
          std::cerr << "gaigel: giving up on decision " << r.decision_id() << ": every legal action was rejected\n";
          break;
        }
        Send(action);
        break;
      }
      case v1::PlayResponse::kEvent:
        OnEvent(msg.event());
        break;
      case v1::PlayResponse::kMatchStart: {
        const auto& m = msg.match_start();
        match_ = MatchState{m.match_id(), m.seat(), m.resume_token(),
                            m.clock().has_resume_grace() ? Seconds(m.clock().resume_grace()) : 0.0};
        in_match_ = true;
        has_pending_ = false;
        if (opt_.matches > 0 && matches_done_ + 1 >= opt_.matches && !leave_sent_) {
          v1::PlayRequest leave;
          leave.mutable_leave();
          stream_->Write(leave);
          leave_sent_ = true;
        }
        bot_.OnMatchStart(m);
        break;
      }
      case v1::PlayResponse::kHandStart:
        OnHandStart(msg.hand_start());
        break;
      case v1::PlayResponse::kHandEnd:
        OnHandEnd(msg.hand_end());
        break;
      case v1::PlayResponse::kMatchEnd:
        has_pending_ = false;
        in_match_ = false;
        bot_.OnMatchEnd(msg.match_end());
        if (opt_.matches > 0 && ++matches_done_ >= opt_.matches) return true;
        break;
      default:
        break;  // a message kind from a newer server: ignore it
    }
    return false;
  }

  Bot& bot_;
  Options opt_;
  std::unique_ptr<v1::BotService::Stub> stub_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::PlayRequest, v1::PlayResponse>> stream_;
  uint64_t last_sequence_ = 0;
  bool in_match_ = false;
  MatchState match_;
  bool has_pending_ = false;
  v1::DecisionRequest pending_;
  std::vector<int> pending_answers_;
  int matches_done_ = 0;
  bool leave_sent_ = false;
};

}  // namespace

bool CompactFromEnv(const char* value) {
  std::string v = value ? value : "1";
  const char* space = " \t\n\v\f\r";
  v.erase(0, v.find_first_not_of(space));
  v.erase(v.find_last_not_of(space) + 1);
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return v != "0" && v != "false" && v != "no" && v != "off";
}

int MatchesFromEnv(const char* value) {
  std::string v = value ? value : "";
  const char* space = " \t\n\v\f\r";
  v.erase(0, v.find_first_not_of(space));
  v.erase(v.find_last_not_of(space) + 1);
  long long n = 0;
  for (char c : v) {
    if (c < '0' || c > '9') return -1;
    n = std::min<long long>(INT_MAX, n * 10 + (c - '0'));
  }
  return static_cast<int>(n);
}

Options OptionsFromEnv(Options base) {
  if (base.matches == 0) {
    const char* value = std::getenv("GAIGEL_MATCHES");
    base.matches = MatchesFromEnv(value);
    if (base.matches < 0) {
      base.matches = 0;
      base.config_error = std::string("GAIGEL_MATCHES must be a number, got \"") + value + "\"";
    }
  }
  if (base.server.empty()) base.server = Env("GAIGEL_SERVER");
  if (base.server.empty()) base.server = "127.0.0.1:50051";
  if (base.token.empty()) base.token = Env("GAIGEL_TOKEN");
  if (base.bot_name.empty()) base.bot_name = Env("GAIGEL_BOT_NAME");
  if (base.bot_name.empty()) base.bot_name = "cpp-bot";
  base.compact = base.compact && CompactFromEnv(std::getenv("GAIGEL_COMPACT"));
  return base;
}

int Run(Bot& bot, const Options& options) {
  if (!options.config_error.empty()) {
    std::cerr << "gaigel: " << options.config_error << "\n";
    return 1;
  }
  if (options.token.empty()) {
    std::cerr << "gaigel: no bot token: set GAIGEL_TOKEN to the token issued when the bot was registered\n";
    return 1;
  }
  Session session(bot, options);
  return session.Run();
}

}  // namespace gaigel
