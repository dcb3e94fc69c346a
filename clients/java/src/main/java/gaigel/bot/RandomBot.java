package gaigel.bot;

import gaigel.v1.DecisionRequest;
import gaigel.v1.LegalAction;
import gaigel.v1.MatchStart;
import java.util.List;
import java.util.Random;

/** The example bot: plays a seeded random legal action. Run: java -jar target/gaigel-bot.jar */
public final class RandomBot implements Bot {
    private Random rng = new Random(0);

    // The seat's bot seed: a rematch of this match's record plays the same choices.
    @Override
    public void onMatchStart(MatchStart start) {
        rng = new Random(start.getBotSeed());
    }

    // ---- Your logic goes here: return the id of one of request's legal actions. ----
    @Override
    public int decide(DecisionRequest request) {
        List<LegalAction> actions = request.getLegalActionsList();
        return actions.get(rng.nextInt(actions.size())).getId();
    }

    public static void main(String[] args) {
        try {
            int matches = GaigelClient.run(new RandomBot(), GaigelClient.Config.fromEnv("random-java"));
            System.err.println("gaigel-bot: played " + matches + " match(es)");
        } catch (GaigelClient.GaigelException e) {
            // A setting or the server's refusal: one line says what to fix (a bug in decide keeps its trace).
            System.err.println("gaigel-bot: " + e.getMessage());
            System.exit(1);
        }
    }
}
