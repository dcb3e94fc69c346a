package gaigel.bot;

import gaigel.v1.DecisionRequest;
import gaigel.v1.LegalAction;
import java.util.List;
import java.util.Random;

/** The example bot: plays a seeded random legal action. Run: java -jar target/gaigel-bot.jar */
public final class RandomBot implements Bot {
    private final Random rng;

    RandomBot(long seed) {
        rng = new Random(seed);
    }

    // ---- Your logic goes here: return the id of one of request's legal actions. ----
    @Override
    public int decide(DecisionRequest request) {
        List<LegalAction> actions = request.getLegalActionsList();
        return actions.get(rng.nextInt(actions.size())).getId();
    }

    public static void main(String[] args) {
        long seed = Long.parseLong(System.getenv().getOrDefault("GAIGEL_SEED", "0"));
        int matches = GaigelClient.run(new RandomBot(seed), GaigelClient.Config.fromEnv("random-java"));
        System.err.println("gaigel-bot: played " + matches + " match(es)");
    }
}
