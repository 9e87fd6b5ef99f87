// The chaos workload's transactional producer with Kafka's Java client (kafka-clients of the Kafka under test,
// so a cluster at transaction.version 2 sees KIP-890's client protocol: EndTxn v5 with an epoch bump per
// transaction, implicit partition adds). The same loop and the same JSON Lines events as the Python producer of
// audit/chaos/client.py: init, then transactions of 1-3 sends over the output partitions, 3 in 4 committed,
// an abortable error aborted, a fatal one (fenced) ends the process. A file STALL appearing makes the next
// transaction stall past transaction.timeout.ms before its commit (the timeout fault).
//
//   java -cp <kafka classpath>:<classes> ChaosProducer BOOTSTRAP TID INSTANCE TOPIC PARTITIONS SEED DEADLINE
//        TXN_TIMEOUT_MS STALL_FILE PROCESS LOG
import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.Random;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.OutOfOrderSequenceException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.UnsupportedVersionException;
import org.apache.kafka.common.serialization.StringSerializer;

public class ChaosProducer {
    static FileOutputStream log;
    static String process;
    static int calls = 0;
    // HotSpot's nanoTime on Linux is CLOCK_MONOTONIC itself: the clock of Python's time.monotonic()
    static double now() {
        return System.nanoTime() / 1e9;
    }

    static String q(String s) {
        return s == null ? "null" : "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    static synchronized void write(int call, String type, String f, String value, String error) {
        String line = "{\"time\": " + now() + ", \"process\": " + q(process) + ", \"call\": " + call + ", \"type\": "
            + q(type) + ", \"f\": " + q(f) + ", \"value\": {" + value + "}" + (error != null ? ", \"error\": " + q(error) : "")
            + "}\n";
        try {
            log.write(line.getBytes(StandardCharsets.UTF_8));
            log.flush();
        } catch (IOException e) {
            throw new RuntimeException(e);
        }
    }

    static synchronized int invoke(String f, String value) {
        calls++;
        write(calls, "invoke", f, value, null);
        return calls;
    }

    // fatal: the instance is done (fenced, or an error Kafka's javadoc says cannot be recovered from)
    static boolean fatal(Throwable e) {
        return e instanceof ProducerFencedException || e instanceof OutOfOrderSequenceException
            || e instanceof UnsupportedVersionException || e instanceof AuthorizationException;
    }

    static String name(Throwable e) {
        Throwable t = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
        return t.getClass().getSimpleName();
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], tid = args[1], topic = args[3], stall = args[8];
        int instance = Integer.parseInt(args[2]), partitions = Integer.parseInt(args[4]);
        long seed = Long.parseLong(args[5]), txnTimeoutMs = Long.parseLong(args[7]);
        process = args[9];
        double deadline = Double.parseDouble(args[6]);
        log = new FileOutputStream(args[10], true);
        Random rng = new Random(seed);
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("transactional.id", tid);
        p.put("acks", "all");
        p.put("enable.idempotence", "true");
        p.put("transaction.timeout.ms", String.valueOf(txnTimeoutMs));
        p.put("delivery.timeout.ms", String.valueOf(txnTimeoutMs - 1000));
        p.put("request.timeout.ms", "3000");
        p.put("max.block.ms", "10000");
        p.put("linger.ms", "5");
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        KafkaProducer<String, String> producer = new KafkaProducer<>(p);
        String who = "\"tid\": " + q(tid) + ", \"instance\": " + instance;
        boolean ready = false;
        while (!ready && now() < deadline) {
            int call = invoke("init", who + ", \"client\": \"java\"");
            try {
                producer.initTransactions();
                write(call, "ok", "init", "", null);
                ready = true;
            } catch (org.apache.kafka.common.errors.TimeoutException e) {
                write(call, "info", "init", "\"class\": \"retriable\"", name(e));
            } catch (KafkaException e) {
                write(call, "fail", "init", "\"class\": \"fatal\"", name(e));
                Runtime.getRuntime().halt(0);
            }
        }
        int n = 0;
        while (ready && now() < deadline) {
            String txn = tid + "#" + instance + "." + n++;
            int call = invoke("begin", who + ", \"txn\": " + q(txn));
            try {
                producer.beginTransaction();
                write(call, "ok", "begin", "", null);
            } catch (KafkaException e) {
                write(call, "fail", "begin", "", name(e));
                break;
            }
            int k = 1 + rng.nextInt(3);
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            List<Integer> sendCalls = new ArrayList<>();
            boolean acked = true;
            for (int j = 0; j < k; j++) {
                int part = rng.nextInt(partitions);
                String value = txn + "/" + j;
                int c = invoke("send", "\"topic\": " + q(topic) + ", \"partition\": " + part + ", \"value\": " + q(value)
                    + ", \"txn\": " + q(txn));
                try {
                    sent.add(producer.send(new ProducerRecord<>(topic, part, null, value)));
                    sendCalls.add(c);
                } catch (KafkaException e) {
                    write(c, fatal(e) ? "fail" : "info", "send", "", name(e));
                    acked = false;
                    break;
                }
            }
            for (int j = 0; j < sent.size(); j++) {
                try {
                    RecordMetadata m = sent.get(j).get(txnTimeoutMs, TimeUnit.MILLISECONDS);
                    write(sendCalls.get(j), "ok", "send", "\"offset\": " + m.offset(), null);
                } catch (ExecutionException | TimeoutException e) {
                    acked = false;
                    write(sendCalls.get(j), "info", "send", "", name(e));
                }
            }
            if (Files.exists(Path.of(stall))) {
                Files.deleteIfExists(Path.of(stall));
                Thread.sleep(txnTimeoutMs + 3000);
            }
            String how = acked && rng.nextDouble() < 0.75 ? "commit" : "abort";
            String outcome = end(producer, how, txn);
            if (outcome.equals("fatal")) break;
            if (!outcome.equals("ok") && how.equals("commit")) {
                if (end(producer, "abort", txn).equals("fatal")) break;
            } else if (!outcome.equals("ok")) {
                break;
            }
            Thread.sleep(50 + rng.nextInt(250));
        }
        Runtime.getRuntime().halt(0); // every event is written; close() could block on an unreachable broker
    }

    // commit or abort; a TimeoutException may be retried (the Java client's contract): bounded
    static String end(KafkaProducer<String, String> producer, String how, String txn) {
        for (int attempt = 0; attempt < 4; attempt++) {
            int call = invoke(how, "\"txn\": " + q(txn));
            try {
                if (how.equals("commit")) producer.commitTransaction(); else producer.abortTransaction();
                write(call, "ok", how, "", null);
                return "ok";
            } catch (org.apache.kafka.common.errors.TimeoutException e) {
                write(call, "info", how, "\"class\": \"retriable\"", name(e));
            } catch (KafkaException e) {
                boolean isFatal = fatal(e);
                write(call, "fail", how, "\"class\": " + q(isFatal ? "fatal" : "abortable"), name(e));
                return isFatal ? "fatal" : "abortable";
            } catch (IllegalStateException e) {
                write(call, "fail", how, "\"class\": \"fatal\"", name(e));
                return "fatal";
            }
        }
        return "unknown";
    }
}
