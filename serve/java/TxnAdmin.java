// kafka-transactions.sh's workflow with the Java Admin client, against any bootstrap address (txnspec serve, or a
// real Kafka broker): the same answers are expected from both.
//
//   java -cp <kafka-clients jars>:. TxnAdmin <bootstrap> <run-id>
//
// 1. a topic held-<run>; a transactional producer commits one record, then opens a transaction, sends 3 records
// and stops there (kept open, never committed); 2. Admin.listTransactions finds it Ongoing; describeTransactions
// names its partition; describeProducers gives the partition's open transaction and its start offset; 3.
// Admin.abortTransaction aborts it with the producer's id and epoch and the partition's coordinator epoch (as the
// tool's "abort --start-offset" does); 4. the read_committed end offset (the LSO) moves past the aborted records.
// The last line is RESULT {json}; exit 0 when the transaction was found, described and aborted.
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.kafka.clients.admin.AbortTransactionSpec;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringSerializer;

public class TxnAdmin {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], run = args[1];
        String topic = "held-" + run, tid = "hanging-" + run;
        TopicPartition tp = new TopicPartition(topic, 0);
        StringBuilder out = new StringBuilder();
        boolean ok;
        try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
            admin.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get();
            Properties p = new Properties();
            p.put("bootstrap.servers", bootstrap);
            p.put("transactional.id", tid);
            p.put("key.serializer", StringSerializer.class.getName());
            p.put("value.serializer", StringSerializer.class.getName());
            KafkaProducer<String, String> producer = new KafkaProducer<>(p);
            producer.initTransactions();
            producer.beginTransaction();
            producer.send(new ProducerRecord<>(topic, "committed"));
            producer.commitTransaction();
            producer.beginTransaction();
            for (int i = 0; i < 3; i++) {
                producer.send(new ProducerRecord<>(topic, "hanging-" + i));
            }
            producer.flush();
            long lsoBefore = lso(admin, tp);

            String listed = "";
            for (TransactionListing t : admin.listTransactions().all().get()) {
                if (t.transactionalId().equals(tid)) {
                    listed = t.state().toString();
                }
            }
            TransactionDescription d = admin.describeTransactions(List.of(tid)).description(tid).get();
            ProducerState open = null;
            for (ProducerState s : admin.describeProducers(List.of(tp)).partitionResult(tp).get().activeProducers()) {
                if (s.producerId() == d.producerId() && s.currentTransactionStartOffset().isPresent()) {
                    open = s;
                }
            }
            long start = open == null ? -1 : open.currentTransactionStartOffset().getAsLong();
            String aborted = "not found";
            if (open != null) {
                int coordinatorEpoch = open.coordinatorEpoch().orElse(0);
                admin.abortTransaction(new AbortTransactionSpec(tp, open.producerId(), (short) open.producerEpoch(),
                        coordinatorEpoch)).all().get();
                aborted = "aborted";
            }
            long lsoAfter = lso(admin, tp);
            producer.close(Duration.ZERO);
            ok = listed.equals("Ongoing") && d.state().toString().equals("Ongoing")
                    && d.topicPartitions().equals(java.util.Set.of(tp)) && start == lsoBefore
                    && aborted.equals("aborted") && lsoAfter == start + 4;
            out.append("{\"listed\": \"").append(listed).append("\", \"described\": \"").append(d.state())
                    .append("\", \"partitions\": ").append(d.topicPartitions().size())
                    .append(", \"timeout_ms\": ").append(d.transactionTimeoutMs())
                    .append(", \"start_offset\": ").append(start).append(", \"lso_before\": ").append(lsoBefore)
                    .append(", \"abort\": \"").append(aborted).append("\", \"lso_after\": ").append(lsoAfter)
                    .append(", \"ok\": ").append(ok).append("}");
        }
        System.out.println("RESULT " + out);
        System.exit(ok ? 0 : 1);
    }

    static long lso(Admin admin, TopicPartition tp) throws Exception {
        return admin.listOffsets(Map.of(tp, OffsetSpec.latest()), new ListOffsetsOptions(IsolationLevel.READ_COMMITTED))
                .partitionResult(tp).get().offset();
    }
}
