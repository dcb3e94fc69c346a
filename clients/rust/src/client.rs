//! The session loop: connect, Join, answer decisions, handle rejections, Resume after a
//! dropped stream, stop after the configured number of matches.

use std::fmt;
use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::transport::{Channel, Endpoint};
use tonic::Code;

use crate::pb::bot_service_client::BotServiceClient;
use crate::pb::play_request::Message as Out;
use crate::pb::play_response::Message as In;
use crate::pb::{self, PlayRequest, PlayResponse};
use crate::{Bot, PROTOCOL_VERSION};

/// The default server address.
pub const DEFAULT_SERVER: &str = "127.0.0.1:50051";

/// Connection settings; [`Config::from_env`] reads them from the environment. To build one
/// by hand, write `Config { token, name, ..Default::default() }`, so that fields added later
/// keep their defaults.
#[derive(Debug, Clone)]
pub struct Config {
    /// `host:port` of the server (`$GAIGEL_SERVER`, default `127.0.0.1:50051`).
    pub server: String,
    /// The bot token (`$GAIGEL_TOKEN`, required).
    pub token: String,
    /// The registered bot name sent in Join (`$GAIGEL_BOT_NAME`, else the default given).
    pub name: String,
    /// Stop after this many matches (`$GAIGEL_MATCHES`; unset or 0: until the server ends
    /// the session).
    pub matches: Option<u32>,
    /// How long to keep retrying an unreachable server outside a match.
    pub connect_timeout: Duration,
    /// The first reconnect delay; it doubles up to `max_backoff`.
    pub initial_backoff: Duration,
    /// The longest reconnect delay.
    pub max_backoff: Duration,
    /// Compact mode (`Join.compact` and `Join.compact_hand_end`), default `true`: the server
    /// sends HandStart, Events and a hand's HandEnd inside the next DecisionRequest instead
    /// of on their own, one message per decision. The client unfolds them, so the hooks and
    /// `decide` are called in the same order either way; a server without compact mode
    /// ignores it. `false` turns it off. [`Config::from_env`] sets it from `$GAIGEL_COMPACT`
    /// as the Python SDK reads it (`0`, `false`, `no` or `off` join plain); set it after
    /// `from_env` to overrule that.
    pub compact: bool,
}

impl Default for Config {
    /// The defaults of [`Config::from_env`], with no token and no name.
    fn default() -> Self {
        Config {
            server: DEFAULT_SERVER.to_string(),
            token: String::new(),
            name: String::new(),
            matches: None,
            connect_timeout: Duration::from_secs(30),
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(5),
            compact: true,
        }
    }
}

impl Config {
    /// Reads `GAIGEL_SERVER`, `GAIGEL_TOKEN`, `GAIGEL_BOT_NAME`, `GAIGEL_MATCHES` and
    /// `GAIGEL_COMPACT`.
    pub fn from_env(default_name: &str) -> Result<Config, Error> {
        Config::from_vars(default_name, |k| std::env::var(k).ok())
    }

    /// [`Config::from_env`] with `lookup` for the environment.
    fn from_vars(
        default_name: &str,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Config, Error> {
        let var = |k: &str| lookup(k).filter(|v| !v.is_empty());
        let token = var("GAIGEL_TOKEN").ok_or_else(|| {
            Error::Config(
                "no bot token: set GAIGEL_TOKEN to the token issued when the bot was registered"
                    .into(),
            )
        })?;
        let matches = match var("GAIGEL_MATCHES") {
            None => None,
            Some(v) => match v.parse::<u32>() {
                Ok(0) => None,
                Ok(n) => Some(n),
                Err(_) => {
                    return Err(Error::Config(format!(
                        "GAIGEL_MATCHES must be a number, got {v:?}"
                    )))
                }
            },
        };
        Ok(Config {
            server: var("GAIGEL_SERVER").unwrap_or_else(|| DEFAULT_SERVER.to_string()),
            token,
            name: var("GAIGEL_BOT_NAME").unwrap_or_else(|| default_name.to_string()),
            matches,
            compact: compact_from(lookup("GAIGEL_COMPACT").as_deref()),
            ..Default::default()
        })
    }
}

/// Whether a `$GAIGEL_COMPACT` value (`None`: unset) asks for compact mode: yes unless it is
/// `0`, `false`, `no` or `off` (any case, spaces around ignored), as in the Python SDK; an
/// unknown value means compact.
fn compact_from(value: Option<&str>) -> bool {
    !matches!(
        value.unwrap_or("1").trim().to_lowercase().as_str(),
        "0" | "false" | "no" | "off"
    )
}

/// Why [`run`] stopped early.
pub enum Error {
    /// Bad settings (no token, bad address); nothing was sent.
    Config(String),
    /// The server ended the stream with an error, e.g. UNAUTHENTICATED; the message says
    /// what to fix.
    Server(tonic::Status),
    /// The server stayed unreachable for too long.
    ConnectionLost(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Config(m) => write!(f, "configuration: {m}"),
            Error::Server(s) => write!(f, "server error {:?}: {}", s.code(), s.message()),
            Error::ConnectionLost(m) => write!(f, "connection lost: {m}"),
        }
    }
}

// Debug shows the readable message, so that `fn main() -> Result<(), Error>` reports it.
impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for Error {}

/// Runs `bot` until done (see [`run_async`]) on a single-threaded Tokio runtime.
pub fn run<B: Bot>(bot: &mut B, config: Config) -> Result<u32, Error> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("cannot start the Tokio runtime")
        .block_on(run_async(bot, config))
}

/// Connects `bot` to the server and plays until done; returns the matches played.
///
/// * Sends Join, then answers every DecisionRequest with `bot.decide`.
/// * When an answer is rejected and the decision is still open, asks `decide` once more;
///   if it repeats itself or names an illegal action, sends the first legal action. A
///   buggy bot costs at most two strikes per decision.
/// * When the stream breaks (UNAVAILABLE; inside a match also INTERNAL, UNKNOWN,
///   CANCELLED), reconnects with exponential backoff and, inside a match, sends Resume
///   with the last sequence number seen, for as long as the match's resume grace period.
///   Resent messages are skipped; an answer that got no reply yet is sent again.
/// * Returns after the `config.matches`-th MatchEnd (having sent Leave when that match
///   started), or when the server ends the session with OK.
pub async fn run_async<B: Bot>(bot: &mut B, config: Config) -> Result<u32, Error> {
    if config.matches == Some(0) {
        return Err(Error::Config("matches must be at least 1 (or None)".into()));
    }
    let channel = match config.server.strip_prefix("unix:") {
        Some(path) => unix_channel(path),
        None => Endpoint::from_shared(format!("http://{}", config.server))
            .map_err(|e| Error::Config(format!("bad server address {:?}: {e}", config.server)))?
            .connect_timeout(Duration::from_secs(5))
            .tcp_nodelay(true)
            .connect_lazy(),
    };
    Session::new(bot, config, channel).run().await
}

/// A channel to a server listening on the unix socket at `path` (`unix:/run/gaigel/server.sock`),
/// as a sandboxed arena gives it; the endpoint's URI is only a placeholder then.
fn unix_channel(path: &str) -> Channel {
    let path = path.to_string();
    Endpoint::from_static("http://localhost")
        .connect_timeout(Duration::from_secs(5))
        .connect_with_connector_lazy(tower::service_fn(move |_: tonic::transport::Uri| {
            let path = path.clone();
            async move {
                let stream = tokio::net::UnixStream::connect(path).await?;
                Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
            }
        }))
}

struct MatchInfo {
    match_id: String,
    seat: i32,
    resume_token: String,
    grace: Option<Duration>,
}

struct Pending {
    request: pb::DecisionRequest,
    answers: Vec<i32>,
}

struct Session<'b, B: Bot> {
    bot: &'b mut B,
    config: Config,
    client: BotServiceClient<Channel>,
    version: String,
    last_sequence: u64,
    current: Option<MatchInfo>,
    pending: Option<Pending>,
    matches_done: u32,
    leave_sent: bool,
    outbox: Option<mpsc::UnboundedSender<PlayRequest>>,
}

fn log(msg: impl fmt::Display) {
    eprintln!("gaigel-bot: {msg}");
}

fn is_dropped(code: Code, in_match: bool) -> bool {
    code == Code::Unavailable
        || (in_match && matches!(code, Code::Internal | Code::Unknown | Code::Cancelled))
}

enum Step {
    Continue,
    Done,
}

impl<'b, B: Bot> Session<'b, B> {
    fn new(bot: &'b mut B, config: Config, channel: Channel) -> Self {
        let version = bot.version();
        Session {
            bot,
            config,
            client: BotServiceClient::new(channel),
            version,
            last_sequence: 0,
            current: None,
            pending: None,
            matches_done: 0,
            leave_sent: false,
            outbox: None,
        }
    }

    async fn run(mut self) -> Result<u32, Error> {
        let mut failures: u32 = 0;
        let mut lost_since: Option<Instant> = None;
        loop {
            let resuming = self.current.is_some();
            let first = if let Some(m) = &self.current {
                Out::Resume(pb::Resume {
                    match_id: m.match_id.clone(),
                    seat: m.seat,
                    resume_token: m.resume_token.clone(),
                    last_sequence: self.last_sequence,
                    bot_version: self.version.clone(),
                })
            } else {
                self.last_sequence = 0;
                self.pending = None;
                Out::Join(self.join())
            };
            let (tx, rx) = mpsc::unbounded_channel();
            let _ = tx.send(PlayRequest {
                message: Some(first),
            });
            self.outbox = Some(tx);
            let mut welcomed = false;
            let result: Result<Step, tonic::Status> = async {
                let mut stream = self
                    .client
                    .play(UnboundedReceiverStream::new(rx))
                    .await?
                    .into_inner();
                while let Some(response) = stream.message().await? {
                    if matches!(response.message, Some(In::Welcome(_))) {
                        welcomed = true;
                        failures = 0;
                        lost_since = None;
                    }
                    if let Step::Done = self.handle(response, resuming) {
                        return Ok(Step::Done); // dropping `stream` cancels the call
                    }
                }
                Ok(Step::Continue)
            }
            .await;
            self.outbox = None; // ends the request stream
            let status = match result {
                Ok(Step::Done) => return Ok(self.matches_done),
                Ok(Step::Continue) => {
                    log("the server ended the session");
                    return Ok(self.matches_done);
                }
                Err(status) => status,
            };
            let code = status.code();
            if resuming && !welcomed && matches!(code, Code::FailedPrecondition | Code::NotFound) {
                let id = self.current.take().map(|m| m.match_id).unwrap_or_default();
                log(format_args!(
                    "could not resume match {id} ({code:?}: {}); joining afresh",
                    status.message()
                ));
                self.matches_done += 1; // the match is over for us
                if self.config.matches.is_some_and(|n| self.matches_done >= n) {
                    return Ok(self.matches_done);
                }
                continue;
            }
            if !is_dropped(code, self.current.is_some()) {
                return Err(Error::Server(status));
            }
            let now = Instant::now();
            let since = *lost_since.get_or_insert(now);
            let limit = self
                .current
                .as_ref()
                .and_then(|m| m.grace)
                .unwrap_or(self.config.connect_timeout);
            let lost_for = now - since;
            if lost_for >= limit {
                return Err(Error::ConnectionLost(format!(
                    "server unreachable for {:.1} s (limit {:.1} s); last status {code:?}: {}",
                    lost_for.as_secs_f64(),
                    limit.as_secs_f64(),
                    status.message()
                )));
            }
            let delay = backoff(&self.config, failures, jitter(failures)).min(limit - lost_for);
            failures += 1;
            let what = match &self.current {
                Some(m) => format!("resuming match {}", m.match_id),
                None => "reconnecting".to_string(),
            };
            log(format_args!(
                "stream lost ({code:?}: {}); {what} in {:.2} s",
                status.message(),
                delay.as_secs_f64()
            ));
            tokio::time::sleep(delay).await;
        }
    }

    // ..Default::default() as for Action: a Join field added to the proto later stays zero.
    #[allow(clippy::needless_update)]
    fn join(&self) -> pb::Join {
        pb::Join {
            bot_token: self.config.token.clone(),
            bot_name: self.config.name.clone(),
            bot_version: self.version.clone(),
            protocol_version: PROTOCOL_VERSION,
            compact: self.config.compact,
            compact_hand_end: self.config.compact,
            ..Default::default()
        }
    }

    fn send(&self, message: Out) {
        if let Some(tx) = &self.outbox {
            let _ = tx.send(PlayRequest {
                message: Some(message),
            });
        }
    }

    fn send_action(&mut self, action_id: i32) {
        let Some(pending) = self.pending.as_mut() else {
            return;
        };
        pending.answers.push(action_id);
        let decision_id = pending.request.decision_id.clone();
        // ..Default::default(): later additive proto fields (such as time_capped) keep their zero value.
        self.send(Out::Action(pb::Action {
            decision_id,
            action_id,
            ..Default::default()
        }));
    }

    /// Handles one server message.
    fn handle(&mut self, response: PlayResponse, resuming: bool) -> Step {
        let Some(message) = response.message else {
            log(format_args!(
                "ignoring an empty server message (sequence {})",
                response.sequence
            ));
            return Step::Continue;
        };
        if let In::Welcome(w) = message {
            self.on_welcome(w, resuming);
            return Step::Continue;
        }
        let seq = response.sequence;
        if seq <= self.last_sequence {
            return Step::Continue; // resent after a Resume: already seen
        }
        if seq != self.last_sequence + 1 {
            log(format_args!(
                "messages {}..{} never arrived",
                self.last_sequence + 1,
                seq - 1
            ));
        }
        self.last_sequence = seq;
        match message {
            In::Welcome(_) => unreachable!(),
            In::DecisionRequest(mut request) => {
                // Compact mode: what rode in the request first, in the order it happened, as
                // if it had come on its own (the end of the previous hand, then this hand's
                // start and events; the pending decision they would clear is replaced below).
                // Without folded messages this does nothing.
                for e in std::mem::take(&mut request.ended_hand_events) {
                    self.bot.on_event(&e);
                }
                if let Some(h) = request.hand_end.take() {
                    self.bot.on_hand_end(&h);
                }
                if let Some(h) = request.hand_start.take() {
                    self.bot.on_hand_start(&h);
                }
                for e in std::mem::take(&mut request.events) {
                    self.bot.on_event(&e);
                }
                let action = self.bot.decide(&request);
                self.pending = Some(Pending {
                    request,
                    answers: Vec::new(),
                });
                self.send_action(action);
            }
            In::ActionRejected(msg) => self.on_rejected(msg),
            In::Event(e) => {
                self.pending = None;
                self.bot.on_event(&e);
            }
            In::MatchStart(m) => {
                let grace = m
                    .clock
                    .as_ref()
                    .and_then(|c| c.resume_grace)
                    .and_then(|d| Duration::try_from(d).ok().filter(|d| !d.is_zero()));
                self.current = Some(MatchInfo {
                    match_id: m.match_id.clone(),
                    seat: m.seat,
                    resume_token: m.resume_token.clone(),
                    grace,
                });
                self.pending = None;
                if !self.leave_sent
                    && self
                        .config
                        .matches
                        .is_some_and(|n| self.matches_done + 1 >= n)
                {
                    self.send(Out::Leave(pb::Leave {}));
                    self.leave_sent = true;
                }
                self.bot.on_match_start(&m);
            }
            In::HandStart(h) => {
                self.pending = None;
                self.bot.on_hand_start(&h);
            }
            In::HandEnd(h) => {
                self.pending = None;
                self.bot.on_hand_end(&h);
            }
            In::MatchEnd(m) => {
                self.pending = None;
                self.current = None;
                self.matches_done += 1;
                self.bot.on_match_end(&m);
                if self.config.matches.is_some_and(|n| self.matches_done >= n) {
                    return Step::Done;
                }
            }
        }
        Step::Continue
    }

    fn on_welcome(&mut self, msg: pb::Welcome, resuming: bool) {
        log(format_args!(
            "{} session {} as {:?} (server {})",
            if msg.resumed { "resumed" } else { "joined" },
            msg.session_id,
            msg.bot_name,
            msg.server_version
        ));
        self.bot.on_welcome(&msg);
        if !resuming {
            return;
        }
        // The decision was the last thing we heard of: our answer may have been lost with
        // the old stream, so send it (or a first one) again.
        let action = match &self.pending {
            None => return,
            Some(p) => match p.answers.last() {
                Some(&a) => a,
                None => self.bot.decide(&p.request),
            },
        };
        self.send_action(action);
    }

    fn on_rejected(&mut self, msg: pb::ActionRejected) {
        log(format_args!(
            "action {} for decision {} rejected ({:?}, strike {} of limit {}): {}",
            msg.action_id,
            msg.decision_id,
            msg.reason(),
            msg.strikes,
            msg.strikes_limit,
            msg.message
        ));
        self.bot.on_rejected(&msg);
        let Some(pending) = &self.pending else { return };
        if !msg.decision_open || msg.decision_id != pending.request.decision_id {
            return;
        }
        let action = retry_action(pending, || self.bot.decide(&pending.request));
        match action {
            Some(a) => self.send_action(a),
            None => log(format_args!(
                "giving up on decision {}: the server rejected every answer, the first legal one included",
                msg.decision_id
            )),
        }
    }
}

/// The answer to send after a rejection: the bot's second opinion if it is new and legal,
/// else the first legal action; `None` when that was rejected too.
fn retry_action(pending: &Pending, decide: impl FnOnce() -> i32) -> Option<i32> {
    let legal: Vec<i32> = pending.request.legal_actions.iter().map(|a| a.id).collect();
    let first = *legal.first()?;
    let action = if pending.answers.len() == 1 {
        let a = decide();
        if pending.answers.contains(&a) || !legal.contains(&a) {
            log(format_args!("decide answered {a} again or illegally; falling back to the first legal action {first}"));
            first
        } else {
            a
        }
    } else {
        first
    };
    (!pending.answers.contains(&action)).then_some(action)
}

fn jitter(n: u32) -> f64 {
    // 0.8..1.2, varied without a random dependency.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    0.8 + 0.4 * f64::from((nanos ^ n.wrapping_mul(2_654_435_761)) % 1000) / 1000.0
}

fn backoff(config: &Config, failures: u32, jitter: f64) -> Duration {
    let base = config
        .initial_backoff
        .saturating_mul(1u32 << failures.min(16));
    base.min(config.max_backoff).mul_f64(jitter)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending(ids: &[i32], answers: &[i32]) -> Pending {
        let legal_actions = ids
            .iter()
            .map(|&id| pb::LegalAction {
                id,
                ..Default::default()
            })
            .collect();
        Pending {
            request: pb::DecisionRequest {
                decision_id: "d1".into(),
                legal_actions,
                ..Default::default()
            },
            answers: answers.to_vec(),
        }
    }

    #[test]
    fn retry_takes_a_new_legal_answer() {
        assert_eq!(retry_action(&pending(&[3, 7, 9], &[3]), || 9), Some(9));
    }

    #[test]
    fn retry_falls_back_to_first_legal_then_gives_up() {
        // decide repeats itself: first legal action instead
        assert_eq!(retry_action(&pending(&[3, 7], &[7]), || 7), Some(3));
        // decide names an illegal action: first legal action instead
        assert_eq!(retry_action(&pending(&[3, 7], &[7]), || 100), Some(3));
        // second rejection: the first legal action, unless it was rejected already
        assert_eq!(retry_action(&pending(&[3, 7], &[7, 9]), || 7), Some(3));
        assert_eq!(retry_action(&pending(&[3, 7], &[7, 3]), || 7), None);
    }

    #[test]
    fn backoff_doubles_up_to_the_limit() {
        let config = Config {
            token: "t".into(),
            name: "n".into(),
            ..Default::default()
        };
        assert_eq!(backoff(&config, 0, 1.0), Duration::from_millis(100));
        assert_eq!(backoff(&config, 3, 1.0), Duration::from_millis(800));
        assert_eq!(backoff(&config, 30, 1.0), Duration::from_secs(5));
    }

    #[test]
    fn messages_encode_and_decode() {
        use prost::Message;
        let join = PlayRequest {
            message: Some(Out::Join(pb::Join {
                bot_token: "tok".into(),
                bot_name: "me".into(),
                bot_version: "1".into(),
                protocol_version: PROTOCOL_VERSION,
                ..Default::default()
            })),
        };
        let bytes = join.encode_to_vec();
        assert_eq!(PlayRequest::decode(bytes.as_slice()).unwrap(), join);
    }

    /// Writes down every callback.
    #[derive(Default)]
    struct LogBot(Vec<String>);

    impl Bot for LogBot {
        fn decide(&mut self, request: &pb::DecisionRequest) -> i32 {
            let folded = request.hand_start.is_some()
                || !request.events.is_empty()
                || request.hand_end.is_some()
                || !request.ended_hand_events.is_empty();
            self.0
                .push(format!("decide {} folded={folded}", request.decision_id));
            request.legal_actions[0].id
        }
        fn on_welcome(&mut self, _: &pb::Welcome) {
            self.0.push("welcome".into());
        }
        fn on_match_start(&mut self, _: &pb::MatchStart) {
            self.0.push("match_start".into());
        }
        fn on_hand_start(&mut self, msg: &pb::HandStart) {
            self.0
                .push(format!("hand_start dealer={}", msg.dealer_seat));
        }
        fn on_event(&mut self, msg: &pb::Event) {
            self.0.push(format!("event {:?}", msg.kind));
        }
        fn on_hand_end(&mut self, msg: &pb::HandEnd) {
            self.0.push(format!("hand_end hand={}", msg.hand_index));
        }
        fn on_match_end(&mut self, _: &pb::MatchEnd) {
            self.0.push("match_end".into());
        }
    }

    /// Feeds `messages` (numbered from 1 after a Welcome) to a session and returns the
    /// callbacks the bot saw.
    fn callbacks(messages: Vec<In>) -> Vec<String> {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(async {
                let mut bot = LogBot::default();
                let config = Config {
                    token: "t".into(),
                    name: "n".into(),
                    matches: Some(1),
                    ..Default::default()
                };
                let channel = Endpoint::from_static("http://127.0.0.1:1").connect_lazy();
                let mut session = Session::new(&mut bot, config, channel);
                let welcome = In::Welcome(pb::Welcome::default());
                session.handle(
                    PlayResponse {
                        sequence: 0,
                        message: Some(welcome),
                    },
                    false,
                );
                for (i, message) in messages.into_iter().enumerate() {
                    session.handle(
                        PlayResponse {
                            sequence: i as u64 + 1,
                            message: Some(message),
                        },
                        false,
                    );
                }
                drop(session);
                bot.0
            })
    }

    #[test]
    fn compact_decision_request_unfolds_in_order() {
        use pb::event::Kind;
        let event = |kind| pb::Event {
            kind: Some(kind),
            ..Default::default()
        };
        let ended_hand_events = vec![
            event(Kind::CardPlayed(pb::CardPlayed {
                seat: 0,
                ..Default::default()
            })),
            event(Kind::TrickWon(pb::TrickWon {
                winner_seat: 0,
                ..Default::default()
            })),
        ];
        let hand_end = pb::HandEnd {
            hand_index: 1,
            ..Default::default()
        };
        let hand_start = pb::HandStart {
            dealer_seat: 1,
            ..Default::default()
        };
        let events = vec![
            event(Kind::OpeningDeclared(pb::OpeningDeclared {
                seat: 1,
                ..Default::default()
            })),
            event(Kind::CardPlayed(pb::CardPlayed {
                seat: 1,
                ..Default::default()
            })),
        ];
        let request = pb::DecisionRequest {
            decision_id: "d1".into(),
            legal_actions: vec![pb::LegalAction {
                id: 3,
                ..Default::default()
            }],
            ..Default::default()
        };
        let start = || In::MatchStart(pb::MatchStart::default());
        let end = || In::MatchEnd(pb::MatchEnd::default());
        let folded = pb::DecisionRequest {
            ended_hand_events: ended_hand_events.clone(),
            hand_end: Some(hand_end.clone()),
            hand_start: Some(hand_start.clone()),
            events: events.clone(),
            ..request.clone()
        };
        let compact = callbacks(vec![start(), In::DecisionRequest(folded), end()]);
        let mut plain_messages = vec![start()];
        plain_messages.extend(ended_hand_events.into_iter().map(In::Event));
        plain_messages.extend([In::HandEnd(hand_end), In::HandStart(hand_start)]);
        plain_messages.extend(events.into_iter().map(In::Event));
        plain_messages.extend([In::DecisionRequest(request), end()]);
        let plain = callbacks(plain_messages);
        assert_eq!(compact.len(), 10, "{compact:?}");
        assert_eq!(compact[..2], ["welcome", "match_start"]);
        assert!(
            compact[2].starts_with("event Some(CardPlayed(CardPlayed { seat: 0"),
            "{compact:?}"
        );
        assert!(compact[3].starts_with("event Some(TrickWon"), "{compact:?}");
        assert_eq!(compact[4..6], ["hand_end hand=1", "hand_start dealer=1"]);
        assert!(
            compact[6].starts_with("event Some(OpeningDeclared(OpeningDeclared { seat: 1"),
            "{compact:?}"
        );
        assert!(
            compact[7].starts_with("event Some(CardPlayed(CardPlayed { seat: 1"),
            "{compact:?}"
        );
        assert_eq!(compact[8..], ["decide d1 folded=false", "match_end"]);
        assert_eq!(compact, plain);
    }

    #[tokio::test] // a channel needs a runtime, even a lazy one
    async fn join_asks_for_the_folded_hand_end_only_when_compact() {
        let channel = Endpoint::from_static("http://127.0.0.1:1").connect_lazy();
        for compact in [true, false] {
            let mut bot = LogBot::default();
            let config = Config {
                token: "t".into(),
                name: "n".into(),
                compact,
                ..Default::default()
            };
            let join = Session::new(&mut bot, config, channel.clone()).join();
            assert_eq!((join.compact, join.compact_hand_end), (compact, compact));
        }
    }

    #[test]
    fn config_defaults_to_compact() {
        assert!(Config::default().compact);
    }

    #[test]
    fn gaigel_compact_is_read_as_in_the_python_sdk() {
        for v in [
            None,
            Some(""),
            Some("1"),
            Some("true"),
            Some("yes"),
            Some("on"),
            Some("maybe"),
            Some("2"),
        ] {
            assert!(compact_from(v), "GAIGEL_COMPACT={v:?} should mean compact");
        }
        for v in ["0", "false", "no", "off", "FALSE", " Off\n", "No"] {
            assert!(
                !compact_from(Some(v)),
                "GAIGEL_COMPACT={v:?} should mean plain"
            );
        }
    }

    #[test]
    fn from_env_reads_gaigel_compact() {
        let config = |compact: Option<&str>| {
            let compact = compact.map(str::to_string);
            Config::from_vars("me", move |k| match k {
                "GAIGEL_TOKEN" => Some("tok".into()),
                "GAIGEL_COMPACT" => compact.clone(),
                _ => None,
            })
            .unwrap()
        };
        assert!(config(None).compact);
        assert!(config(Some("1")).compact);
        assert!(!config(Some("0")).compact);
        assert!(!config(Some("off")).compact);
    }
}
