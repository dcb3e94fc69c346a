//! The example bot: plays a seeded random legal action.
//!
//!     GAIGEL_SERVER=127.0.0.1:50051 GAIGEL_TOKEN=<token> cargo run --release

use gaigel_bot::{pb, Bot, Config, Rng};

struct RandomBot {
    rng: Rng,
}

impl Bot for RandomBot {
    // The seat's bot seed: a rematch of this match's record plays the same choices.
    fn on_match_start(&mut self, msg: &pb::MatchStart) {
        self.rng = Rng::new(msg.bot_seed);
    }

    // ---- Your logic goes here: return the id of one of request.legal_actions. ----
    fn decide(&mut self, request: &pb::DecisionRequest) -> i32 {
        self.rng.choose(&request.legal_actions).id
    }
}

fn main() -> Result<(), gaigel_bot::Error> {
    let config = Config::from_env("random-rs")?;
    let matches = gaigel_bot::run(&mut RandomBot { rng: Rng::new(0) }, config)?;
    eprintln!("gaigel-bot: played {matches} match(es)");
    Ok(())
}
