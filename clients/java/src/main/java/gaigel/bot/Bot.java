package gaigel.bot;

import gaigel.v1.ActionRejected;
import gaigel.v1.DecisionRequest;
import gaigel.v1.MatchStart;
import gaigel.v1.Welcome;
import gaigel.v1.Event;
import gaigel.v1.HandEnd;
import gaigel.v1.HandStart;
import gaigel.v1.MatchEnd;

/**
 * A Gaigel bot: one required method, {@link #decide}, and optional hooks that see the
 * server's messages in order. All methods run on the thread that called
 * {@link GaigelClient#run}.
 */
public interface Bot {
    /** Chooses an action: must return the {@code id} of one of {@code request.getLegalActionsList()}. */
    int decide(DecisionRequest request);

    /** The bot's version string, recorded in match records. */
    default String version() {
        return "0.1.0";
    }

    /** The session was accepted (also after a resume). */
    default void onWelcome(Welcome welcome) {}

    /**
     * A match begins: seat, sides, ruleset, clocks, and {@code start.getBotSeed()}: seed all your
     * randomness from it and a rematch of the record plays the same (docs/bot-guide.md, Bot seeds).
     */
    default void onMatchStart(MatchStart start) {}

    /** A hand begins: dealer, forehand, own cards, trump card. */
    default void onHandStart(HandStart start) {}

    /** Something public happened. */
    default void onEvent(Event event) {}

    /** An answer was not accepted (the client retries for you). */
    default void onRejected(ActionRejected rejected) {}

    /** A hand ended. */
    default void onHandEnd(HandEnd end) {}

    /** A match ended; the seed is revealed here. */
    default void onMatchEnd(MatchEnd end) {}
}
