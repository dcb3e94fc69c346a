package gaigel.bot;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import gaigel.v1.DecisionRequest;
import gaigel.v1.Join;
import gaigel.v1.LegalAction;
import gaigel.v1.MatchStart;
import gaigel.v1.PlayRequest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class GaigelClientTest {
    private static DecisionRequest request(int... ids) {
        DecisionRequest.Builder b = DecisionRequest.newBuilder().setDecisionId("d1");
        for (int id : ids) {
            b.addLegalActions(LegalAction.newBuilder().setId(id));
        }
        return b.build();
    }

    @Test
    void retryTakesANewLegalAnswer() {
        assertEquals(9, GaigelClient.retryAction(request(3, 7, 9), new ArrayList<>(List.of(3)), () -> 9));
    }

    @Test
    void retryFallsBackToTheFirstLegalActionThenGivesUp() {
        assertEquals(3, GaigelClient.retryAction(request(3, 7), List.of(7), () -> 7)); // repeated
        assertEquals(3, GaigelClient.retryAction(request(3, 7), List.of(7), () -> 100)); // illegal
        assertEquals(3, GaigelClient.retryAction(request(3, 7), List.of(7, 9), () -> 7)); // second rejection
        assertNull(GaigelClient.retryAction(request(3, 7), List.of(7, 3), () -> 7)); // all rejected
    }

    @Test
    void backoffDoublesUpToTheLimit() {
        var config = new GaigelClient.Config("h:1", "t", "n", 0, Duration.ofSeconds(30),
                Duration.ofMillis(100), Duration.ofSeconds(5));
        assertEquals(Duration.ofMillis(100), GaigelClient.backoff(config, 0));
        assertEquals(Duration.ofMillis(800), GaigelClient.backoff(config, 3));
        assertEquals(Duration.ofSeconds(5), GaigelClient.backoff(config, 30));
    }

    @Test
    void randomBotIsSeededAndLegal() throws Exception {
        DecisionRequest r = request(0, 5, 48, 144);
        List<Integer> a = new ArrayList<>();
        List<Integer> b = new ArrayList<>();
        RandomBot x = new RandomBot();
        RandomBot y = new RandomBot();
        x.onMatchStart(MatchStart.newBuilder().setBotSeed(42).build());
        y.onMatchStart(MatchStart.newBuilder().setBotSeed(42).build());
        for (int i = 0; i < 20; i++) {
            a.add(x.decide(r));
            b.add(y.decide(r));
        }
        assertEquals(a, b);
        for (int id : a) {
            assertEquals(true, List.of(0, 5, 48, 144).contains(id));
        }
        PlayRequest join = PlayRequest.newBuilder().setJoin(Join.newBuilder().setBotName("me").setProtocolVersion(1)).build();
        assertEquals(join, PlayRequest.parseFrom(join.toByteArray()));
    }

    @Test
    void gaigelCompactIsReadAsInThePythonSdk() {
        for (String v : new String[] {null, "", "1", "true", "yes", "on", "maybe", "2"}) {
            assertTrue(GaigelClient.Config.compactFromEnv(v), "GAIGEL_COMPACT=" + v + " should mean compact");
        }
        for (String v : new String[] {"0", "false", "no", "off", "FALSE", " Off\n", "No"}) {
            assertFalse(GaigelClient.Config.compactFromEnv(v), "GAIGEL_COMPACT=" + v + " should mean plain");
        }
    }

    @Test
    void fromEnvReadsGaigelCompactAndWithCompactOverrulesIt() {
        Map<String, String> env = Map.of("GAIGEL_TOKEN", "tok", "GAIGEL_COMPACT", "off");
        GaigelClient.Config plain = GaigelClient.Config.fromEnv("me", env::get);
        assertFalse(plain.compact());
        assertTrue(plain.withCompact(true).compact());
        assertTrue(GaigelClient.Config.fromEnv("me", Map.of("GAIGEL_TOKEN", "tok")::get).compact());
        assertEquals("me", plain.name());
        assertEquals(GaigelClient.DEFAULT_SERVER, plain.server());
    }

    @Test
    void fromEnvReadsGaigelMatchesAsAWholeNumberOfAtLeastZero() {
        assertEquals(0, GaigelClient.Config.fromEnv("me", Map.of("GAIGEL_TOKEN", "tok")::get).matches());
        assertEquals(0, GaigelClient.Config.fromEnv("me", Map.of("GAIGEL_TOKEN", "tok", "GAIGEL_MATCHES", "0")::get).matches());
        assertEquals(3, GaigelClient.Config.fromEnv("me", Map.of("GAIGEL_TOKEN", "tok", "GAIGEL_MATCHES", "3")::get).matches());
        for (String bad : new String[] {"-1", "+2", "two", "1.5"}) {
            GaigelClient.GaigelException e = org.junit.jupiter.api.Assertions.assertThrows(GaigelClient.GaigelException.class,
                    () -> GaigelClient.Config.fromEnv("me", Map.of("GAIGEL_TOKEN", "tok", "GAIGEL_MATCHES", bad)::get));
            assertEquals("GAIGEL_MATCHES must be a number, got \"" + bad + "\"", e.getMessage());
        }
    }
}
