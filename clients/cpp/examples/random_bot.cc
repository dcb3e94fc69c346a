// A complete Gaigel bot in C++: plays a seeded random legal action.
// Run with GAIGEL_SERVER, GAIGEL_TOKEN (and GAIGEL_BOT_NAME) set, or under `gaigel try`.
#include <cstdlib>
#include <iostream>
#include <random>

#include "gaigel/client.h"

class RandomBot : public gaigel::Bot {
 public:
  // The seat's bot seed: a rematch of this match's record plays the same choices.
  void OnMatchStart(const gaigel::v1::MatchStart& start) override { rng_.seed(start.bot_seed()); }

  int Decide(const gaigel::v1::DecisionRequest& request) override {
    const auto& obs = request.observation();  // what this seat knows now
    (void)obs;
    // ---- YOUR LOGIC HERE -------------------------------------------------------
    // request.legal_actions(i): id(), label() ("play HKa +marriage"), kind(), card().code()
    // obs.hand(i).code(), obs.trump_suit(), obs.phase(), obs.current_trick(i).card().code()
    // Return the id of one legal action.
    std::uniform_int_distribution<int> pick(0, request.legal_actions_size() - 1);
    return request.legal_actions(pick(rng_)).id();
    // ---- END OF YOUR LOGIC -----------------------------------------------------
  }

  void OnMatchEnd(const gaigel::v1::MatchEnd& end) override {
    std::cerr << "random_bot: match " << end.match_id() << " over after " << end.hands_played() << " hands\n";
  }

 private:
  std::mt19937_64 rng_{0};
};

int main() {
  RandomBot bot;
  gaigel::Options options;
  options.bot_version = "random-cpp 1.0";
  options.verbose = std::getenv("GAIGEL_VERBOSE") != nullptr;
  return gaigel::Run(bot, gaigel::OptionsFromEnv(options));
}
