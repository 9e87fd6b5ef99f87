// What the chaos workload's Java clients share (ChaosProducer.java, ChaosCtp.java): the JSON Lines events of
// audit/chaos/history.py (an invoke, then its completion, on CLOCK_MONOTONIC), the error classes the checkers
// read (fatal: fenced or unrecoverable; abortable; retriable), and the transactional producer's life: its
// configuration, initTransactions retried until the deadline, beginTransaction, the sends' delivery reports, and
// commitTransaction or abortTransaction retried on a TimeoutException (bounded).
import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Properties;
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

public class ChaosClient {
    static FileOutputStream log;
    static String process;
    static int calls = 0;

    // the process's name in the history and the file its events are appended to
    static void open(String processName, String logPath) throws IOException {
        process = processName;
        log = new FileOutputStream(logPath, true);
    }

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

    static KafkaProducer<String, String> producer(String bootstrap, String tid, long txnTimeoutMs) {
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
        return new KafkaProducer<>(p);
    }

    // the "tid" and "instance" of the init and begin events
    static String who(String tid, int instance) {
        return "\"tid\": " + q(tid) + ", \"instance\": " + instance;
    }

    // initTransactions until it succeeds or the deadline passes; a fatal error ends the process. True: ready.
    static boolean init(KafkaProducer<String, String> producer, String who, double deadline) {
        while (now() < deadline) {
            int call = invoke("init", who + ", \"client\": \"java\"");
            try {
                producer.initTransactions();
                write(call, "ok", "init", "", null);
                return true;
            } catch (org.apache.kafka.common.errors.TimeoutException e) {
                write(call, "info", "init", "\"class\": \"retriable\"", name(e));
            } catch (KafkaException e) {
                write(call, "fail", "init", "\"class\": \"fatal\"", name(e));
                Runtime.getRuntime().halt(0);
            }
        }
        return false;
    }

    // beginTransaction of the transaction named txn. True: begun.
    static boolean begin(KafkaProducer<String, String> producer, String who, String txn) {
        int call = invoke("begin", who + ", \"txn\": " + q(txn));
        try {
            producer.beginTransaction();
            write(call, "ok", "begin", "", null);
            return true;
        } catch (KafkaException e) {
            write(call, "fail", "begin", "", name(e));
            return false;
        }
    }

    // one send of transaction txn to topic's partition part: its invoke (extra: more fields of the event), its
    // future kept in sent for delivered(). False: the send threw (its call completed here as fail or info).
    static boolean send(KafkaProducer<String, String> producer, String topic, int part, String value, String txn,
                        String extra, List<Future<RecordMetadata>> sent, List<Integer> sendCalls) {
        int c = invoke("send", "\"topic\": " + q(topic) + ", \"partition\": " + part + ", \"value\": " + q(value)
            + ", \"txn\": " + q(txn) + extra);
        try {
            sent.add(producer.send(new ProducerRecord<>(topic, part, null, value)));
            sendCalls.add(c);
            return true;
        } catch (KafkaException e) {
            write(c, fatal(e) ? "fail" : "info", "send", "", name(e));
            return false;
        }
    }

    // each send's delivery report completes its call (bounded by the transaction timeout). True: all acknowledged.
    static boolean delivered(List<Future<RecordMetadata>> sent, List<Integer> sendCalls, long txnTimeoutMs)
            throws InterruptedException {
        boolean acked = true;
        for (int j = 0; j < sent.size(); j++) {
            try {
                RecordMetadata m = sent.get(j).get(txnTimeoutMs, TimeUnit.MILLISECONDS);
                write(sendCalls.get(j), "ok", "send", "\"offset\": " + m.offset(), null);
            } catch (ExecutionException | TimeoutException e) {
                acked = false;
                write(sendCalls.get(j), "info", "send", "", name(e));
            }
        }
        return acked;
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
