package gaigel.bot;

import gaigel.v1.ActionKind;
import gaigel.v1.DecisionRequest;
import gaigel.v1.LegalAction;
import gaigel.v1.Card;
import gaigel.v1.Observation;
import java.util.List;

/**
 * A slightly smarter bot that reads the observation: melds when it can, else keeps its
 * trumps by playing a non-trump card, else takes the first legal action. Run:
 * java -cp target/gaigel-bot.jar gaigel.bot.MeldBot
 */
public final class MeldBot implements Bot {
    @Override
    public int decide(DecisionRequest request) {
        Observation obs = request.getObservation();
        List<String> hand = obs.getHandList().stream().map(Card::getCode).toList(); // e.g. [HKa, EAb]
        System.err.printf("seat %d phase %s hand %s trump %s%n", obs.getSeat(), obs.getPhase(), hand, obs.getTrumpSuit());
        List<LegalAction> actions = request.getLegalActionsList(); // in ascending id order, never empty
        for (LegalAction a : actions) {
            if (a.getKind() == ActionKind.ACTION_KIND_PLAY_WITH_MELD) {
                return a.getId(); // always meld when we can
            }
        }
        for (LegalAction a : actions) {
            if (a.hasCard() && a.getCard().getSuit() != obs.getTrumpSuit()) {
                return a.getId();
            }
        }
        return actions.get(0).getId();
    }

    public static void main(String[] args) {
        GaigelClient.run(new MeldBot(), GaigelClient.Config.fromEnv("meld-java"));
    }
}
