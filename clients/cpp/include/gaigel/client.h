// The C++ kit for Gaigel bots: subclass gaigel::Bot, write Decide, call gaigel::Run.
//
// The session loop handles the protocol (gaigel.v1 BotService.Play): it sends Join,
// answers every DecisionRequest with Bot::Decide, retries after an ActionRejected,
// reconnects with Resume (exponential backoff) when the stream drops during a match,
// and plays until the server ends the session (or leaves after Options::matches matches).
#pragma once

#include <cstdint>
#include <string>

#include "gaigel/v1/bot_service.pb.h"

namespace gaigel {

namespace v1 = ::gaigel::v1;

// A bot. Only Decide is required; the On* hooks see the server's messages in order (also
// in compact mode: the ended hand's Events and HandEnd, the HandStart and the Events folded
// into a DecisionRequest are passed to OnEvent, OnHandEnd, OnHandStart and OnEvent first,
// and Decide gets the request without them).
class Bot {
 public:
  virtual ~Bot() = default;
  // Returns the id of one of request.legal_actions() (request.legal_actions(i).id()).
  // request.observation() holds everything the seat may know now.
  virtual int Decide(const v1::DecisionRequest& request) = 0;
  // A match begins. Seed all randomness from start.bot_seed() (and from nothing else) and
  // a rematch of the record plays the same (docs/bot-guide.md, Bot seeds).
  virtual void OnMatchStart(const v1::MatchStart&) {}
  virtual void OnHandStart(const v1::HandStart&) {}
  virtual void OnEvent(const v1::Event&) {}
  virtual void OnHandEnd(const v1::HandEnd&) {}
  virtual void OnMatchEnd(const v1::MatchEnd&) {}
  virtual void OnRejected(const v1::ActionRejected&) {}
};

struct Options {
  std::string server;       // host:port; default $GAIGEL_SERVER, else 127.0.0.1:50051
  std::string token;        // default $GAIGEL_TOKEN (required)
  std::string bot_name;     // default $GAIGEL_BOT_NAME, else "cpp-bot"
  std::string bot_version;  // recorded in match records
  // 0 (the default): play until the server ends the session (gaigel try and the arena end
  // it after the match, status OK), so one process can play many matches. N > 0: leave after
  // N matches (Leave is sent when the N-th starts). OptionsFromEnv reads GAIGEL_MATCHES.
  int matches = 0;
  double connect_timeout = 30.0;  // seconds to retry an unreachable server outside a match
  double initial_backoff = 0.1;   // seconds; doubles per failed reconnect ...
  double max_backoff = 5.0;       // ... up to this
  bool verbose = false;           // log joins, resumes and rejections to stderr
  // Compact mode (Join.compact and Join.compact_hand_end): the server sends Events, HandEnd
  // and HandStart inside the next DecisionRequest instead of on their own, one message per
  // decision. Run unfolds them, so OnEvent, OnHandEnd, OnHandStart and Decide are called in
  // the same order either way; a server without compact mode ignores it. false turns it
  // off. OptionsFromEnv also turns it off when GAIGEL_COMPACT says so; set it after
  // OptionsFromEnv to overrule the variable.
  bool compact = true;
  // A configuration error found by OptionsFromEnv (a bad GAIGEL_MATCHES); Run prints it and
  // returns 1 without connecting. Empty: none.
  std::string config_error;
};

// Fills unset options from the environment (GAIGEL_SERVER, GAIGEL_TOKEN, GAIGEL_BOT_NAME,
// and GAIGEL_MATCHES when base.matches is 0), and turns compact off when
// CompactFromEnv(getenv("GAIGEL_COMPACT")) is false (a base.compact of false stays false).
// A GAIGEL_MATCHES that is not a whole number sets config_error
// ("GAIGEL_MATCHES must be a number, got \"abc\"").
Options OptionsFromEnv(Options base = {});

// A GAIGEL_MATCHES value (nullptr: unset) as Options::matches: 0 (until the server ends the
// session) when unset, empty (after trimming spaces) or 0; N for a whole number N (capped at
// INT_MAX); -1 when it is not a whole number ("abc", "-1", "1.5"), a configuration error.
int MatchesFromEnv(const char* value);

// Whether a GAIGEL_COMPACT value (nullptr: unset) asks for compact mode: yes unless it is
// 0, false, no or off (any case, spaces around ignored), as in the Python SDK; an unknown
// value means compact.
bool CompactFromEnv(const char* value);

// Plays until the server ends the session (status OK) or `matches` matches are done.
// Returns 0 on success, 1 on a configuration error (no token, options.config_error), a
// server error or when the server stayed unreachable.
int Run(Bot& bot, const Options& options);

}  // namespace gaigel
