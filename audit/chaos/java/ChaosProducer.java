// The chaos workload's transactional producer with Kafka's Java client (kafka-clients of the Kafka under test,
// so a cluster at transaction.version 2 sees KIP-890's client protocol: EndTxn v5 with an epoch bump per
// transaction, implicit partition adds). The same loop and the same JSON Lines events as the Python producer of
// audit/chaos/client.py: init, then transactions of 1-3 sends over the output partitions, 3 in 4 committed,
// an abortable error aborted, a fatal one (fenced) ends the process. A file STALL appearing makes the next
// transaction stall past transaction.timeout.ms before its commit (the timeout fault). The events, the
// producer's configuration and its calls are ChaosClient's (shared with ChaosCtp).
//
//   java -cp <kafka classpath>:<classes> ChaosProducer BOOTSTRAP TID INSTANCE TOPIC PARTITIONS SEED DEADLINE
//        TXN_TIMEOUT_MS STALL_FILE PROCESS LOG
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.Future;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.RecordMetadata;

public class ChaosProducer {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], tid = args[1], topic = args[3], stall = args[8];
        int instance = Integer.parseInt(args[2]), partitions = Integer.parseInt(args[4]);
        long seed = Long.parseLong(args[5]), txnTimeoutMs = Long.parseLong(args[7]);
        double deadline = Double.parseDouble(args[6]);
        ChaosClient.open(args[9], args[10]);
        Random rng = new Random(seed);
        KafkaProducer<String, String> producer = ChaosClient.producer(bootstrap, tid, txnTimeoutMs);
        String who = ChaosClient.who(tid, instance);
        boolean ready = ChaosClient.init(producer, who, deadline);
        int n = 0;
        while (ready && ChaosClient.now() < deadline) {
            String txn = tid + "#" + instance + "." + n++;
            if (!ChaosClient.begin(producer, who, txn)) break;
            int k = 1 + rng.nextInt(3);
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            List<Integer> sendCalls = new ArrayList<>();
            boolean acked = true;
            for (int j = 0; j < k; j++) {
                int part = rng.nextInt(partitions);
                if (!ChaosClient.send(producer, topic, part, txn + "/" + j, txn, "", sent, sendCalls)) {
                    acked = false;
                    break;
                }
            }
            boolean reported = ChaosClient.delivered(sent, sendCalls, txnTimeoutMs);
            acked = acked && reported;
            if (Files.exists(Path.of(stall))) {
                Files.deleteIfExists(Path.of(stall));
                Thread.sleep(txnTimeoutMs + 3000);
            }
            String how = acked && rng.nextDouble() < 0.75 ? "commit" : "abort";
            String outcome = ChaosClient.end(producer, how, txn);
            if (outcome.equals("fatal")) break;
            if (!outcome.equals("ok") && how.equals("commit")) {
                if (ChaosClient.end(producer, "abort", txn).equals("fatal")) break;
            } else if (!outcome.equals("ok")) {
                break;
            }
            Thread.sleep(50 + rng.nextInt(250));
        }
        Runtime.getRuntime().halt(0); // every event is written; close() could block on an unreachable broker
    }
}
