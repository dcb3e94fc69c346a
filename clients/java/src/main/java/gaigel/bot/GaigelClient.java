package gaigel.bot;

import gaigel.v1.BotServiceGrpc;
import gaigel.v1.Action;
import gaigel.v1.ActionRejected;
import gaigel.v1.DecisionRequest;
import gaigel.v1.Event;
import gaigel.v1.Join;
import gaigel.v1.LegalAction;
import gaigel.v1.Leave;
import gaigel.v1.MatchStart;
import gaigel.v1.PlayRequest;
import gaigel.v1.PlayResponse;
import gaigel.v1.Resume;
import gaigel.v1.Welcome;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.Status;
import io.grpc.stub.ClientCallStreamObserver;
import io.grpc.stub.StreamObserver;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.function.UnaryOperator;
import java.util.logging.Logger;

/**
 * The session loop: connects to a Gaigel server (protocol {@code gaigel.v1}), sends Join,
 * answers every DecisionRequest with {@link Bot#decide}, handles ActionRejected, resumes a
 * dropped match with Resume, and returns at MatchEnd once the configured number of
 * matches is played.
 */
public final class GaigelClient {
    /** The protocol major version this kit speaks. */
    public static final int PROTOCOL_VERSION = 1;
    /** The default server address. */
    public static final String DEFAULT_SERVER = "127.0.0.1:50051";

    private static final Logger LOG = Logger.getLogger("gaigel.bot");
    private static final Set<Status.Code> DROPPED = EnumSet.of(Status.Code.UNAVAILABLE);
    private static final Set<Status.Code> DROPPED_IN_MATCH = EnumSet.of(
            Status.Code.UNAVAILABLE, Status.Code.INTERNAL, Status.Code.UNKNOWN, Status.Code.CANCELLED);

    /**
     * Connection settings; {@link #fromEnv} reads them from the environment.
     *
     * <p>{@code compact} (default true, {@link #withCompact}) asks for compact mode
     * (Join.compact, with Join.compact_hand_end): the server sends HandEnd, HandStart and Events
     * inside the next DecisionRequest instead of on their own, one message per decision. The
     * client unfolds them, so {@code onEvent}, {@code onHandEnd}, {@code onHandStart} and
     * {@code decide} are called in the same order either way; a server without compact mode
     * ignores it. {@link #fromEnv} takes it from GAIGEL_COMPACT ({@link #compactFromEnv});
     * {@code withCompact} on its result overrules that.
     */
    public record Config(
            String server,
            String token,
            String name,
            int matches,
            Duration connectTimeout,
            Duration initialBackoff,
            Duration maxBackoff,
            boolean compact) {

        /** The settings without {@code compact}, which is then on (as before compact mode existed). */
        public Config(String server, String token, String name, int matches, Duration connectTimeout,
                Duration initialBackoff, Duration maxBackoff) {
            this(server, token, name, matches, connectTimeout, initialBackoff, maxBackoff, true);
        }

        /** These settings with compact mode on or off. */
        public Config withCompact(boolean compact) {
            return new Config(server, token, name, matches, connectTimeout, initialBackoff, maxBackoff, compact);
        }

        /**
         * Reads GAIGEL_SERVER (default 127.0.0.1:50051), GAIGEL_TOKEN (required),
         * GAIGEL_BOT_NAME (default {@code defaultName}), GAIGEL_MATCHES (stop after that
         * many matches; unset or 0: until the server ends the session) and GAIGEL_COMPACT
         * (see {@link #compactFromEnv}).
         */
        public static Config fromEnv(String defaultName) {
            return fromEnv(defaultName, System::getenv);
        }

        /** {@link #fromEnv(String)} with {@code getenv} for the environment. */
        static Config fromEnv(String defaultName, UnaryOperator<String> getenv) {
            UnaryOperator<String> env = key -> {
                String v = getenv.apply(key);
                return v == null || v.isEmpty() ? null : v;
            };
            String token = env.apply("GAIGEL_TOKEN");
            if (token == null) {
                throw new GaigelException(
                        "no bot token: set GAIGEL_TOKEN to the token issued when the bot was registered");
            }
            String rawMatches = Objects.requireNonNullElse(env.apply("GAIGEL_MATCHES"), "0");
            int matches;
            try {
                matches = Integer.parseInt(rawMatches.strip());
            } catch (NumberFormatException e) {
                matches = -1;
            }
            if (matches < 0 || !rawMatches.strip().chars().allMatch(c -> c >= '0' && c <= '9')) {
                // as every kit: a whole number of at least 0 (Integer.parseInt alone takes "-1" and "+2")
                throw new GaigelException("GAIGEL_MATCHES must be a number, got \"" + rawMatches + "\"");
            }
            return new Config(Objects.requireNonNullElse(env.apply("GAIGEL_SERVER"), DEFAULT_SERVER), token,
                    Objects.requireNonNullElse(env.apply("GAIGEL_BOT_NAME"), defaultName), matches,
                    Duration.ofSeconds(30), Duration.ofMillis(100), Duration.ofSeconds(5),
                    compactFromEnv(getenv.apply("GAIGEL_COMPACT")));
        }

        /**
         * Whether a GAIGEL_COMPACT value ({@code null}: unset) asks for compact mode: yes unless
         * it is 0, false, no or off (any case, spaces around ignored), as in the Python SDK; an
         * unknown value means compact.
         */
        public static boolean compactFromEnv(String value) {
            String v = value == null ? "1" : value.strip().toLowerCase(Locale.ROOT);
            return !Set.of("0", "false", "no", "off").contains(v);
        }
    }

    /** Bad settings, a server error such as UNAUTHENTICATED, or a server unreachable too long. */
    public static final class GaigelException extends RuntimeException {
        private final Status status;

        public GaigelException(String message) {
            this(message, null);
        }

        public GaigelException(String message, Status status) {
            super(message);
            this.status = status;
        }

        /** The server's status when the server ended the stream with an error, else null. */
        public Status status() {
            return status;
        }
    }

    private GaigelClient() {}

    /**
     * Connects {@code bot} to the server and plays until done; returns the matches played.
     *
     * <ul>
     *   <li>When an answer is rejected and the decision is still open, asks {@code decide}
     *       once more; if it repeats itself or names an illegal action, sends the first legal
     *       action. A buggy bot costs at most two strikes per decision.
     *   <li>When the stream breaks (UNAVAILABLE; inside a match also INTERNAL, UNKNOWN,
     *       CANCELLED), reconnects with exponential backoff and, inside a match, sends
     *       Resume with the last sequence number seen, for as long as the match's resume
     *       grace period. Resent messages are skipped; an unanswered decision is answered again.
     *   <li>Returns after the {@code config.matches()}-th MatchEnd (having sent Leave when
     *       that match started), or when the server ends the session with OK.
     * </ul>
     *
     * @throws GaigelException when the server ends the stream with an error, or stays unreachable
     */
    public static int run(Bot bot, Config config) {
        ManagedChannel channel = ManagedChannelBuilder.forTarget(config.server()).usePlaintext().build();
        try {
            return new Session(bot, config, BotServiceGrpc.newStub(channel)).run();
        } finally {
            channel.shutdownNow();
        }
    }

    /** What to send after a rejection: the bot's new legal answer, else the first legal action; null to give up. */
    static Integer retryAction(DecisionRequest request, List<Integer> answers, java.util.function.IntSupplier decide) {
        List<Integer> legal = request.getLegalActionsList().stream().map(LegalAction::getId).toList();
        if (legal.isEmpty()) {
            return null;
        }
        int action = legal.get(0);
        if (answers.size() == 1) {
            int second = decide.getAsInt();
            if (!answers.contains(second) && legal.contains(second)) {
                action = second;
            } else {
                LOG.warning("decide answered " + second + " again or illegally; falling back to the first legal action " + action);
            }
        }
        return answers.contains(action) ? null : action;
    }

    /**
     * Compact mode: passes the messages that rode in {@code request} to the bot's hooks in the
     * order they happened (the ended hand's events to {@code onEvent}, its HandEnd to
     * {@code onHandEnd}, then the HandStart to {@code onHandStart} and the events to
     * {@code onEvent}), and returns the request without them, so the bot sees exactly what it
     * would have seen without compact mode. A request without folded messages is returned as it is.
     */
    static DecisionRequest unfold(DecisionRequest request, Bot bot) {
        if (request.getEndedHandEventsCount() == 0 && !request.hasHandEnd()
                && !request.hasHandStart() && request.getEventsCount() == 0) {
            return request;
        }
        for (Event event : request.getEndedHandEventsList()) {
            bot.onEvent(event);
        }
        if (request.hasHandEnd()) {
            bot.onHandEnd(request.getHandEnd());
        }
        if (request.hasHandStart()) {
            bot.onHandStart(request.getHandStart());
        }
        for (Event event : request.getEventsList()) {
            bot.onEvent(event);
        }
        return request.toBuilder().clearEndedHandEvents().clearHandEnd().clearHandStart().clearEvents().build();
    }

    /** The reconnect delay after {@code failures} failed attempts, before jitter. */
    static Duration backoff(Config config, int failures) {
        Duration d = config.initialBackoff().multipliedBy(1L << Math.min(failures, 16));
        return d.compareTo(config.maxBackoff()) > 0 ? config.maxBackoff() : d;
    }

    private record MatchInfo(String matchId, int seat, String resumeToken, Duration grace) {}

    private static final class Pending {
        final DecisionRequest request;
        final List<Integer> answers = new ArrayList<>();

        Pending(DecisionRequest request) {
            this.request = request;
        }
    }

    /** The end of a response stream: OK when {@code error} is null. */
    private record StreamEnd(Throwable error) {}

    private static final class Session {
        private final Bot bot;
        private final Config config;
        private final BotServiceGrpc.BotServiceStub stub;
        private long lastSequence;
        private MatchInfo current;
        private Pending pending;
        private int matchesDone;
        private boolean leaveSent;
        private StreamObserver<PlayRequest> outbox;

        Session(Bot bot, Config config, BotServiceGrpc.BotServiceStub stub) {
            this.bot = bot;
            this.config = config;
            this.stub = stub;
        }

        int run() {
            int failures = 0;
            long lostSince = -1;
            while (true) {
                boolean resuming = current != null;
                PlayRequest first;
                if (resuming) {
                    first = PlayRequest.newBuilder().setResume(Resume.newBuilder()
                            .setMatchId(current.matchId()).setSeat(current.seat())
                            .setResumeToken(current.resumeToken()).setLastSequence(lastSequence)
                            .setBotVersion(bot.version())).build();
                } else {
                    lastSequence = 0;
                    pending = null;
                    first = PlayRequest.newBuilder().setJoin(Join.newBuilder()
                            .setBotToken(config.token()).setBotName(config.name())
                            .setBotVersion(bot.version()).setProtocolVersion(PROTOCOL_VERSION)
                            .setCompact(config.compact()).setCompactHandEnd(config.compact())).build();
                }
                BlockingQueue<Object> inbox = new LinkedBlockingQueue<>();
                outbox = stub.play(new StreamObserver<>() {
                    @Override public void onNext(PlayResponse r) { inbox.add(r); }
                    @Override public void onError(Throwable t) { inbox.add(new StreamEnd(t)); }
                    @Override public void onCompleted() { inbox.add(new StreamEnd(null)); }
                });
                outbox.onNext(first);
                boolean welcomed = false;
                Status status;
                try {
                    while (true) {
                        Object item = inbox.take();
                        if (item instanceof StreamEnd end) {
                            if (end.error() == null) {
                                LOG.info("the server ended the session");
                                return matchesDone;
                            }
                            status = Status.fromThrowable(end.error());
                            break;
                        }
                        PlayResponse response = (PlayResponse) item;
                        if (response.hasWelcome()) {
                            welcomed = true;
                            failures = 0;
                            lostSince = -1;
                        }
                        if (handle(response, resuming)) {
                            ((ClientCallStreamObserver<PlayRequest>) outbox).cancel("bot done", null);
                            return matchesDone;
                        }
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    ((ClientCallStreamObserver<PlayRequest>) outbox).cancel("interrupted", e);
                    throw new GaigelException("interrupted");
                }
                Status.Code code = status.getCode();
                if (resuming && !welcomed
                        && (code == Status.Code.FAILED_PRECONDITION || code == Status.Code.NOT_FOUND)) {
                    LOG.warning("could not resume match " + current.matchId() + " (" + code + ": "
                            + status.getDescription() + "); joining afresh");
                    current = null;
                    matchesDone++; // the match is over for us
                    if (config.matches() > 0 && matchesDone >= config.matches()) {
                        return matchesDone;
                    }
                    continue;
                }
                if (!(current != null ? DROPPED_IN_MATCH : DROPPED).contains(code)) {
                    throw new GaigelException("server error " + code + ": " + status.getDescription(), status);
                }
                long now = System.nanoTime();
                if (lostSince < 0) {
                    lostSince = now;
                }
                Duration limit = current != null && current.grace() != null ? current.grace() : config.connectTimeout();
                Duration lostFor = Duration.ofNanos(now - lostSince);
                if (lostFor.compareTo(limit) >= 0) {
                    throw new GaigelException(String.format("server unreachable for %.1f s (limit %.1f s); last status %s: %s",
                            lostFor.toMillis() / 1000.0, limit.toMillis() / 1000.0, code, status.getDescription()), status);
                }
                long delay = (long) (backoff(config, failures).toMillis() * ThreadLocalRandom.current().nextDouble(0.8, 1.2));
                delay = Math.min(delay, limit.minus(lostFor).toMillis());
                failures++;
                LOG.warning("stream lost (" + code + ": " + status.getDescription() + "); "
                        + (current != null ? "resuming match " + current.matchId() : "reconnecting")
                        + " in " + delay + " ms");
                try {
                    TimeUnit.MILLISECONDS.sleep(delay);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new GaigelException("interrupted");
                }
            }
        }

        private void send(PlayRequest.Builder request) {
            outbox.onNext(request.build());
        }

        private void sendAction(int actionId) {
            pending.answers.add(actionId);
            send(PlayRequest.newBuilder().setAction(Action.newBuilder()
                    .setDecisionId(pending.request.getDecisionId()).setActionId(actionId)));
        }

        /** Handles one server message; true when the session is done. */
        private boolean handle(PlayResponse response, boolean resuming) {
            if (response.hasWelcome()) {
                onWelcome(response.getWelcome(), resuming);
                return false;
            }
            long seq = response.getSequence();
            if (seq <= lastSequence) {
                return false; // resent after a Resume: already seen
            }
            if (seq != lastSequence + 1) {
                LOG.warning("messages " + (lastSequence + 1) + ".." + (seq - 1) + " never arrived");
            }
            lastSequence = seq;
            switch (response.getMessageCase()) {
                case DECISION_REQUEST -> {
                    pending = new Pending(unfold(response.getDecisionRequest(), bot));
                    sendAction(bot.decide(pending.request));
                }
                case ACTION_REJECTED -> onRejected(response.getActionRejected());
                case EVENT -> {
                    pending = null;
                    bot.onEvent(response.getEvent());
                }
                case MATCH_START -> {
                    MatchStart m = response.getMatchStart();
                    Duration grace = null;
                    if (m.getClock().hasResumeGrace()) {
                        var g = m.getClock().getResumeGrace();
                        grace = Duration.ofSeconds(g.getSeconds(), g.getNanos());
                        if (grace.isZero()) {
                            grace = null;
                        }
                    }
                    current = new MatchInfo(m.getMatchId(), m.getSeat(), m.getResumeToken(), grace);
                    pending = null;
                    if (!leaveSent && config.matches() > 0 && matchesDone + 1 >= config.matches()) {
                        send(PlayRequest.newBuilder().setLeave(Leave.getDefaultInstance()));
                        leaveSent = true;
                    }
                    bot.onMatchStart(m);
                }
                case HAND_START -> {
                    pending = null;
                    bot.onHandStart(response.getHandStart());
                }
                case HAND_END -> {
                    pending = null;
                    bot.onHandEnd(response.getHandEnd());
                }
                case MATCH_END -> {
                    pending = null;
                    current = null;
                    matchesDone++;
                    bot.onMatchEnd(response.getMatchEnd());
                    return config.matches() > 0 && matchesDone >= config.matches();
                }
                default -> LOG.warning("ignoring a server message of unknown kind " + response.getMessageCase()
                        + " (sequence " + seq + ")");
            }
            return false;
        }

        private void onWelcome(Welcome welcome, boolean resuming) {
            LOG.info((welcome.getResumed() ? "resumed" : "joined") + " session " + welcome.getSessionId()
                    + " as " + welcome.getBotName() + " (server " + welcome.getServerVersion() + ")");
            bot.onWelcome(welcome);
            if (resuming && pending != null) {
                // The decision was the last thing we heard of: our answer may have been lost
                // with the old stream, so send it (or a first one) again.
                List<Integer> answers = pending.answers;
                sendAction(answers.isEmpty() ? bot.decide(pending.request) : answers.get(answers.size() - 1));
            }
        }

        private void onRejected(ActionRejected msg) {
            LOG.warning("action " + msg.getActionId() + " for decision " + msg.getDecisionId() + " rejected ("
                    + msg.getReason() + ", strike " + msg.getStrikes() + " of limit " + msg.getStrikesLimit()
                    + "): " + msg.getMessage());
            bot.onRejected(msg);
            if (!msg.getDecisionOpen() || pending == null
                    || !msg.getDecisionId().equals(pending.request.getDecisionId())) {
                return;
            }
            Integer action = retryAction(pending.request, pending.answers, () -> bot.decide(pending.request));
            if (action == null) {
                LOG.severe("giving up on decision " + msg.getDecisionId()
                        + ": the server rejected every answer, the first legal one included");
            } else {
                sendAction(action);
            }
        }
    }
}
