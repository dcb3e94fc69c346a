package gaigel.bot;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import gaigel.v1.BotServiceGrpc;
import gaigel.v1.CardPlayed;
import gaigel.v1.DecisionRequest;
import gaigel.v1.Event;
import gaigel.v1.HandEnd;
import gaigel.v1.HandStart;
import gaigel.v1.Join;
import gaigel.v1.LegalAction;
import gaigel.v1.MatchEnd;
import gaigel.v1.MatchStart;
import gaigel.v1.OpeningDeclared;
import gaigel.v1.PlayRequest;
import gaigel.v1.PlayResponse;
import gaigel.v1.TrickWon;
import gaigel.v1.Welcome;
import io.grpc.Grpc;
import io.grpc.InsecureServerCredentials;
import io.grpc.Server;
import io.grpc.stub.StreamObserver;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/**
 * Compact mode against a scripted server: a DecisionRequest carrying the ended hand's events,
 * its HandEnd, a HandStart and two Events reaches the bot as the same callbacks, in the same
 * order, as those messages sent on their own.
 */
class CompactModeTest {
    private static final List<Event> ENDED_HAND_EVENTS = List.of(
            Event.newBuilder().setCardPlayed(CardPlayed.newBuilder().setSeat(3)).build(),
            Event.newBuilder().setTrickWon(TrickWon.newBuilder().setWinnerSeat(3)).build());
    private static final HandEnd HAND_END = HandEnd.newBuilder().addWinnerSides(1).build();
    private static final HandStart HAND_START = HandStart.newBuilder().setDealerSeat(1).build();
    private static final List<Event> EVENTS = List.of(
            Event.newBuilder().setOpeningDeclared(OpeningDeclared.newBuilder().setSeat(1)).build(),
            Event.newBuilder().setCardPlayed(CardPlayed.newBuilder().setSeat(1).setFaceDown(true)).build());
    private static final DecisionRequest REQUEST = DecisionRequest.newBuilder().setDecisionId("d1")
            .addLegalActions(LegalAction.newBuilder().setId(3)).build();

    /** Writes down every callback. */
    static final class LogBot implements Bot {
        final List<String> log = new ArrayList<>();

        @Override public int decide(DecisionRequest r) {
            log.add("decide " + r);
            return r.getLegalActions(0).getId();
        }
        @Override public void onWelcome(Welcome w) { log.add("welcome"); }
        @Override public void onMatchStart(MatchStart m) { log.add("matchStart"); }
        @Override public void onHandEnd(HandEnd h) { log.add("handEnd " + h); }
        @Override public void onHandStart(HandStart h) { log.add("handStart " + h); }
        @Override public void onEvent(Event e) { log.add("event " + e.getKindCase() + " " + e); }
        @Override public void onMatchEnd(MatchEnd m) { log.add("matchEnd"); }
    }

    /** Plays one scripted decision, folded or each message on its own; returns the Join and the callbacks. */
    private static List<String> play(boolean folded, GaigelClient.Config settings, AtomicReference<Join> join) throws Exception {
        List<PlayResponse> script = new ArrayList<>();
        if (folded) {
            script.add(PlayResponse.newBuilder().setDecisionRequest(REQUEST.toBuilder()
                    .addAllEndedHandEvents(ENDED_HAND_EVENTS).setHandEnd(HAND_END)
                    .setHandStart(HAND_START).addAllEvents(EVENTS)).build());
        } else {
            ENDED_HAND_EVENTS.forEach(e -> script.add(PlayResponse.newBuilder().setEvent(e).build()));
            script.add(PlayResponse.newBuilder().setHandEnd(HAND_END).build());
            script.add(PlayResponse.newBuilder().setHandStart(HAND_START).build());
            EVENTS.forEach(e -> script.add(PlayResponse.newBuilder().setEvent(e).build()));
            script.add(PlayResponse.newBuilder().setDecisionRequest(REQUEST).build());
        }
        BotServiceGrpc.BotServiceImplBase service = new BotServiceGrpc.BotServiceImplBase() {
            @Override
            public StreamObserver<PlayRequest> play(StreamObserver<PlayResponse> out) {
                return new StreamObserver<>() {
                    long seq;

                    private void send(PlayResponse r) {
                        out.onNext(r.toBuilder().setSequence(seq++).build());
                    }

                    @Override
                    public void onNext(PlayRequest r) {
                        if (r.hasJoin()) {
                            join.set(r.getJoin());
                            send(PlayResponse.newBuilder().setWelcome(Welcome.getDefaultInstance()).build());
                            send(PlayResponse.newBuilder().setMatchStart(MatchStart.newBuilder().setMatchId("m")).build());
                            script.forEach(this::send);
                        } else if (r.hasAction()) {
                            send(PlayResponse.newBuilder().setMatchEnd(MatchEnd.newBuilder().setMatchId("m")).build());
                            out.onCompleted();
                        }
                    }

                    @Override public void onError(Throwable t) {}
                    @Override public void onCompleted() {}
                };
            }
        };
        Server server = Grpc.newServerBuilderForPort(0, InsecureServerCredentials.create()).addService(service).build().start();
        try {
            LogBot bot = new LogBot();
            GaigelClient.Config config = new GaigelClient.Config("127.0.0.1:" + server.getPort(), settings.token(),
                    settings.name(), 1, Duration.ofSeconds(5), Duration.ofMillis(100), Duration.ofSeconds(1), settings.compact());
            assertEquals(1, GaigelClient.run(bot, config));
            return bot.log;
        } finally {
            server.shutdownNow();
        }
    }

    @Test
    void foldedDecisionRequestUnfoldsIntoTheCallbacksInOrder() throws Exception {
        var base = new GaigelClient.Config("unused", "tok", "bob", 1, Duration.ofSeconds(5),
                Duration.ofMillis(100), Duration.ofSeconds(1));
        assertTrue(base.compact(), "compact is the default");
        AtomicReference<Join> compactJoin = new AtomicReference<>();
        AtomicReference<Join> plainJoin = new AtomicReference<>();
        List<String> compact = play(true, base, compactJoin);
        List<String> plain = play(false, base.withCompact(false), plainJoin);
        assertTrue(compactJoin.get().getCompact());
        assertTrue(compactJoin.get().getCompactHandEnd());
        assertFalse(plainJoin.get().getCompact());
        assertFalse(plainJoin.get().getCompactHandEnd());
        List<String> kinds = compact.stream().map(s -> s.split(" ")[s.startsWith("event ") ? 1 : 0]).toList();
        assertEquals(List.of("welcome", "matchStart", "CARD_PLAYED", "TRICK_WON", "handEnd", "handStart",
                "OPENING_DECLARED", "CARD_PLAYED", "decide", "matchEnd"), kinds);
        assertEquals(plain, compact);
    }
}
