// KIP-939 with Kafka 4.4's Java client, against any bootstrap address (txnspec serve, or a real Kafka 4.4 broker
// with transaction.two.phase.commit.enable and unstable.api.versions.enable): the same outcome is expected from both.
//
//   java -cp <kafka-clients 4.4 jars>:. TwoPhaseHarness <bootstrap> <run-id>
//
// Kafka 4.4.0's public KafkaProducer has no prepareTransaction, completeTransaction or initTransactions(boolean)
// (its TransactionManager has them: prepareTransaction, initializeTransactions(keepPreparedTxn),
// preparedTransactionState); the harness reaches them by reflection, as Flink reached into the producer before
// KIP-939, and completes as KafkaProducer.completeTransaction does on trunk: commit exactly when the state matches.
//
// 1. producer A (transaction.two.phase.commit.enable): prepare a transaction writing "committed", complete it with
//    its own prepared state (commit); prepare one writing "mismatch", complete with another state (abort).
// 2. producer B: prepare a transaction writing "in-doubt", then crash (B is abandoned, never closed).
// 3. C (same transactional.id) initTransactions(keepPreparedTxn=true): Kafka 4.4.0's client does not put
//    KeepPreparedTxn (nor Enable2Pc) in its request, so this fences B and aborts the in-doubt transaction, and C
//    holds nothing prepared (a 4.4 coordinator would answer KeepPreparedTxn with UNSUPPORTED_VERSION anyway).
// 4. D (same transactional.id) initTransactions(): fences B and aborts the in-doubt transaction.
// 5. B completes its prepared state: fenced. 6. a read_committed reader reads the output.
// The last line is RESULT {json}; exit 0 when every step behaved as Kafka 4.4 does. What the harnesses share is
// ../java/Harness.java's (compiled with this file).
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;

public class TwoPhaseHarness {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], run = args[1];
        String out = "out2pc-" + run, tidA = "tpa-" + run, tidB = "tpb-" + run;
        Harness.createTopics(bootstrap, out);
        KafkaProducer<String, String> a = new KafkaProducer<>(producerProps(bootstrap, tidA));
        a.initTransactions();
        a.beginTransaction();
        a.send(new ProducerRecord<>(out, 0, null, "committed")).get();
        long[] stateA = prepare(a);
        String matching = complete(a, stateA);
        a.beginTransaction();
        a.send(new ProducerRecord<>(out, 0, null, "mismatch")).get();
        long[] other = prepare(a);
        other[1] += 1;  // another prepared state than the client's: completeTransaction aborts
        String mismatching = complete(a, other);
        String sendWhilePrepared = "allowed";
        a.beginTransaction();
        prepare(a);
        try {
            a.send(new ProducerRecord<>(out, 0, null, "after-prepare")).get();
        } catch (Exception e) {
            sendWhilePrepared = e.getClass().getSimpleName();
        }
        a.abortTransaction();
        a.close();

        KafkaProducer<String, String> b = new KafkaProducer<>(producerProps(bootstrap, tidB));
        b.initTransactions();
        b.beginTransaction();
        b.send(new ProducerRecord<>(out, 0, null, "in-doubt")).get();
        long[] stateB = prepare(b);  // B "crashes" here: it is never closed before D fences it

        KafkaProducer<String, String> c = new KafkaProducer<>(producerProps(bootstrap, tidB));
        String keep = "ok";
        String keptCompletion = "none";
        try {
            initTransactions(c, true);
            keptCompletion = complete(c, stateB);
        } catch (Exception e) {
            keep = describe(e);
        }
        c.close(Duration.ofSeconds(5));

        KafkaProducer<String, String> d = new KafkaProducer<>(producerProps(bootstrap, tidB));
        String fence = "ok";
        try {
            d.initTransactions();
        } catch (Exception e) {
            fence = describe(e);
        }
        d.close();
        String zombie = complete(b, stateB);
        b.close(Duration.ofSeconds(5));

        List<String> output = Harness.readCommitted(bootstrap, out, 20_000);
        // Kafka 4.4.0's client never sends Enable2Pc or KeepPreparedTxn (its InitProducerId request leaves them
        // false): C's initTransactions(true) is an ordinary one, which fences B and aborts the in-doubt
        // transaction, and C holds nothing prepared. A client that sends KeepPreparedTxn gets UNSUPPORTED_VERSION
        // from a 4.4 coordinator. Either way the in-doubt record is never committed.
        boolean keptNothing = keep.equals("ok") && keptCompletion.equals("IllegalStateException")
                || keep.startsWith("KafkaException") && keep.contains("not supported");
        boolean ok = matching.equals("committed") && mismatching.equals("aborted")
                && sendWhilePrepared.equals("IllegalStateException") && fence.equals("ok")
                && !zombie.equals("committed") && output.equals(List.of("committed")) && keptNothing;
        System.out.println("RESULT {\"ok\": " + ok + ", \"matching_complete\": \"" + matching
                + "\", \"mismatching_complete\": \"" + mismatching + "\", \"send_while_prepared\": \""
                + sendWhilePrepared + "\", \"init_keep_prepared\": \"" + keep + "\", \"kept_complete\": \""
                + keptCompletion + "\", \"fencing_init\": \"" + fence + "\", \"crashed_complete\": \"" + zombie
                + "\", \"output\": " + Harness.json(output) + "}");
        System.exit(ok ? 0 : 1);
    }

    // the TransactionManager of a producer (4.4.0 keeps it private: no public 2PC API)
    static Object transactionManager(KafkaProducer<?, ?> p) throws Exception {
        Field f = KafkaProducer.class.getDeclaredField("transactionManager");
        f.setAccessible(true);
        return f.get(p);
    }

    static Object call(Object target, String name, Class<?>[] types, Object... args) throws Exception {
        Method m = target.getClass().getDeclaredMethod(name, types);
        m.setAccessible(true);
        try {
            return m.invoke(target, args);
        } catch (java.lang.reflect.InvocationTargetException e) {
            throw (Exception) e.getCause();
        }
    }

    // KafkaProducer.prepareTransaction (trunk): flush, then the TransactionManager's prepareTransaction
    static long[] prepare(KafkaProducer<?, ?> p) throws Exception {
        p.flush();
        Object tm = transactionManager(p);
        call(tm, "prepareTransaction", new Class<?>[0]);
        return pair(call(tm, "preparedTransactionState", new Class<?>[0]));
    }

    static long[] pair(Object producerIdAndEpoch) throws Exception {
        Class<?> c = producerIdAndEpoch.getClass();
        return new long[] {c.getField("producerId").getLong(producerIdAndEpoch),
                           c.getField("epoch").getShort(producerIdAndEpoch)};
    }

    // KafkaProducer.completeTransaction (trunk): commit exactly when the state handed in is the client's
    static String complete(KafkaProducer<?, ?> p, long[] state) {
        try {
            long[] mine = pair(call(transactionManager(p), "preparedTransactionState", new Class<?>[0]));
            if (mine[0] == state[0] && mine[1] == state[1]) {
                p.commitTransaction();
                return "committed";
            }
            p.abortTransaction();
            return "aborted";
        } catch (Exception e) {
            return e.getClass().getSimpleName();
        }
    }

    // KafkaProducer.initTransactions(keepPreparedTxn) (trunk): the TransactionManager's call, the Sender woken
    static void initTransactions(KafkaProducer<?, ?> p, boolean keepPreparedTxn) throws Exception {
        Object tm = transactionManager(p);
        Object result = call(tm, "initializeTransactions", new Class<?>[] {boolean.class}, keepPreparedTxn);
        Field sender = KafkaProducer.class.getDeclaredField("sender");
        sender.setAccessible(true);
        Object s = sender.get(p);
        call(s, "wakeup", new Class<?>[0]);
        call(result, "await", new Class<?>[] {long.class, TimeUnit.class, String.class}, 30000L,
             TimeUnit.MILLISECONDS, "initTransactions(keepPreparedTxn) timed out");
        if (!(Boolean) call(result, "isSuccessful", new Class<?>[0])) {
            throw (Exception) call(result, "error", new Class<?>[0]);
        }
    }

    static String describe(Exception e) {
        return e.getClass().getSimpleName() + ": " + String.valueOf(e.getMessage()).replace("\"", "'");
    }

    static Properties producerProps(String bootstrap, String transactionalId) {
        Properties p = Harness.producerProps(bootstrap, transactionalId);
        p.put("transaction.two.phase.commit.enable", "true");
        return p;
    }
}
