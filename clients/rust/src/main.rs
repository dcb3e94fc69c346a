//! The example bot: plays a seeded random legal action.
//!
//!     GAIGEL_SERVER=127.0.0.1:50051 GAIGEL_TOKEN=<token> cargo run --release

use gaigel_bot::{pb, Bot, Config, Rng};

struct RandomBot {
    rng: Rng,
}

impl Bot for RandomBot {
    // ---- Your logic goes here: return the id of one of request.legal_actions. ----
    fn decide(&mut self, request: &pb::DecisionRequest) -> i32 {
        self.rng.choose(&request.legal_actions).id
    }
}

fn main() -> Result<(), gaigel_bot::Error> {
    let seed = std::env::var("GAIGEL_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0);
    let config = Config::from_env("random-rs")?;
    let matches = gaigel_bot::run(&mut RandomBot { rng: Rng::new(seed) }, config)?;
    eprintln!("gaigel-bot: played {matches} match(es)");
    Ok(())
}
