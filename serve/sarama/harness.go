// A consume-transform-produce pipeline with sarama (IBM/sarama), a zombie and a restart, against any bootstrap
// address (txnspec serve, or a real Kafka broker): the same workload and RESULT as serve/java/TxnHarness.java.
//
//	harness <bootstrap> <run-id>
//
// Stock settings: sarama.NewConfig() with Version = sarama.MaxVersion (its newest requests) and the default
// compression (none); only what sarama requires for idempotence and transactions is set (acks all, one open
// request, Idempotent, Transaction.ID), and Return.Successes for its SyncProducer.
//
// 1. an idempotent producer writes 10 input records; 2. instance A (a transactional producer, a read_committed
// member of group g-<run>) transforms the first 4 in committed transactions, each sending the member's offsets
// with its group metadata (AddMessageToTxnWithGroupMetadata); 3. A opens a transaction and writes "zombie";
// 4. instance B initialises the same transactional.id: A's commit must fail; 5. B, with a new member of the
// group, transforms the rest from the committed offset; 6. KIP-447: group metadata from before a rebalance is
// refused, the current one commits; 7. a read_committed reader reads the output. The last line is RESULT {json}.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

const inputs = 10

func config(transactionalID string) *sarama.Config {
	c := sarama.NewConfig()
	c.Version = sarama.MaxVersion
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Idempotent = true
	c.Producer.Return.Successes = true
	c.Net.MaxOpenRequests = 1
	c.Producer.Transaction.ID = transactionalID
	c.Consumer.IsolationLevel = sarama.ReadCommitted
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Consumer.Group.Heartbeat.Interval = 300 * time.Millisecond
	return c
}

func must(err error, what string) {
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", what, err)
		fmt.Printf("RESULT {\"ok\": false, \"error\": %q}\n", what+": "+err.Error())
		os.Exit(1)
	}
}

// member is one consumer-group member whose sessions are handed to the caller.
type member struct {
	group    sarama.ConsumerGroup
	sessions chan sarama.ConsumerGroupSession
	claims   chan *sarama.ConsumerMessage
	cancel   context.CancelFunc
	done     sync.WaitGroup
}

type handler struct{ m *member }

func (h handler) Setup(s sarama.ConsumerGroupSession) error {
	h.m.sessions <- s
	return nil
}
func (h handler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h handler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for {
		select {
		case msg, ok := <-c.Messages():
			if !ok {
				return nil
			}
			select {
			case h.m.claims <- msg:
			case <-s.Context().Done():
				return nil
			}
		case <-s.Context().Done():
			return nil
		}
	}
}

func join(bootstrap, group, topic string) *member {
	g, err := sarama.NewConsumerGroup([]string{bootstrap}, group, config(""))
	must(err, "consumer group")
	ctx, cancel := context.WithCancel(context.Background())
	m := &member{group: g, sessions: make(chan sarama.ConsumerGroupSession, 16), claims: make(chan *sarama.ConsumerMessage),
		cancel: cancel}
	m.done.Add(1)
	go func() {
		defer m.done.Done()
		for ctx.Err() == nil {
			if err := g.Consume(ctx, []string{topic}, handler{m}); err != nil && ctx.Err() == nil {
				time.Sleep(100 * time.Millisecond)
			}
		}
	}()
	return m
}

func (m *member) close() {
	m.cancel()
	m.done.Wait()
	_ = m.group.Close()
}

func transform(p sarama.SyncProducer, m *member, group, out string, wanted int) int {
	done := 0
	deadline := time.After(30 * time.Second)
	var session sarama.ConsumerGroupSession
	for done < wanted {
		select {
		case session = <-m.sessions:
		case msg := <-m.claims:
			for len(m.sessions) > 0 {
				session = <-m.sessions
			}
			must(p.BeginTxn(), "begin")
			_, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: out, Partition: 0,
				Value: sarama.StringEncoder(strings.ToUpper(string(msg.Value)))})
			must(err, "send")
			must(p.AddMessageToTxnWithGroupMetadata(msg, sarama.NewConsumerGroupMetadataFromSession(session, group, nil), nil),
				"offsets")
			must(p.CommitTxn(), "commit")
			done++
		case <-deadline:
			return done
		}
	}
	return done
}

func producer(bootstrap, tid string) sarama.SyncProducer {
	p, err := sarama.NewSyncProducer([]string{bootstrap}, config(tid))
	must(err, "producer "+tid)
	return p
}

func outcome(err error) string {
	if err == nil {
		return "committed"
	}
	var kerr sarama.KError
	if errors.As(err, &kerr) {
		return kerr.Error()
	}
	return err.Error()
}

// staleGeneration: the first member's session before a second member joins is stale after the rebalance.
func staleGeneration(bootstrap, group, topic, tid string) [2]string {
	first := join(bootstrap, group, topic)
	stale := <-first.sessions
	second := join(bootstrap, group, topic)
	var current sarama.ConsumerGroupSession
	deadline := time.After(30 * time.Second)
	for current == nil || current.GenerationID() <= stale.GenerationID() {
		select {
		case current = <-first.sessions:
		case <-first.claims:
		case <-second.claims:
		case <-second.sessions:
		case <-deadline:
			return [2]string{"timeout", "timeout"}
		}
	}
	p := producer(bootstrap, tid)
	var result [2]string
	offsets := map[string][]*sarama.PartitionOffsetMetadata{topic: {{Partition: 0, Offset: inputs}}}
	for i, s := range []sarama.ConsumerGroupSession{stale, current} {
		must(p.BeginTxn(), "begin")
		err := p.AddOffsetsToTxnWithGroupMetadata(offsets, sarama.NewConsumerGroupMetadataFromSession(s, group, nil))
		if err == nil {
			err = p.CommitTxn()
		}
		result[i] = outcome(err)
		if err != nil {
			_ = p.AbortTxn()
		}
	}
	_ = p.Close()
	go func() {
		for range first.claims {
		}
	}()
	go func() {
		for range second.claims {
		}
	}()
	first.close()
	second.close()
	return result
}

func readCommitted(bootstrap, topic string, want string) []string {
	c, err := sarama.NewConsumer([]string{bootstrap}, config(""))
	must(err, "reader")
	defer c.Close()
	pc, err := c.ConsumePartition(topic, 0, sarama.OffsetOldest)
	must(err, "reader partition")
	defer pc.Close()
	var values []string
	deadline := time.After(15 * time.Second)
	var grace <-chan time.Time
	for {
		select {
		case msg := <-pc.Messages():
			values = append(values, string(msg.Value))
			if string(msg.Value) == want {
				grace = time.After(1500 * time.Millisecond)
			}
		case <-grace:
			return values
		case <-deadline:
			return values
		}
	}
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: harness BOOTSTRAP RUN")
		os.Exit(2)
	}
	bootstrap, run := os.Args[1], os.Args[2]
	in, out, group, tid := "in-"+run, "out-"+run, "g-"+run, "ctp-"+run
	admin, err := sarama.NewClusterAdmin([]string{bootstrap}, config(""))
	must(err, "admin")
	for _, t := range []string{in, out} {
		must(admin.CreateTopic(t, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false), "create "+t)
	}

	plain := producer(bootstrap, "")
	for i := 0; i < inputs; i++ {
		_, _, err := plain.SendMessage(&sarama.ProducerMessage{Topic: in, Partition: 0, Value: sarama.StringEncoder("v" + strconv.Itoa(i))})
		must(err, "input")
	}
	must(plain.Close(), "close input producer")

	a := producer(bootstrap, tid)
	consumerA := join(bootstrap, group, in)
	processed := transform(a, consumerA, group, out, 4)
	must(a.BeginTxn(), "zombie begin")
	_, _, err = a.SendMessage(&sarama.ProducerMessage{Topic: out, Partition: 0, Value: sarama.StringEncoder("zombie")})
	must(err, "zombie send")
	go func() {
		for range consumerA.claims {
		}
	}()
	consumerA.close()

	b := producer(bootstrap, tid)
	zombie := outcome(a.CommitTxn())
	_ = a.Close()

	consumerB := join(bootstrap, group, in)
	processed += transform(b, consumerB, group, out, inputs-processed)
	go func() {
		for range consumerB.claims {
		}
	}()
	consumerB.close()
	_ = b.Close()

	generation := staleGeneration(bootstrap, group, in, "gen-"+run)
	output := readCommitted(bootstrap, out, "V"+strconv.Itoa(inputs-1))
	committed := int64(-1)
	offsets, err := admin.ListConsumerGroupOffsets(group, map[string][]int32{in: {0}})
	must(err, "group offsets")
	if block := offsets.GetBlock(in, 0); block != nil {
		committed = block.Offset
	}
	_ = admin.Close()

	sorted := append([]string(nil), output...)
	sort.Slice(sorted, func(i, j int) bool {
		x, _ := strconv.Atoi(strings.TrimPrefix(sorted[i], "V"))
		y, _ := strconv.Atoi(strings.TrimPrefix(sorted[j], "V"))
		return x < y
	})
	ok := len(sorted) == inputs && committed == inputs && zombie != "committed" && generation[0] != "committed" &&
		generation[1] == "committed"
	for i := 0; ok && i < inputs; i++ {
		ok = sorted[i] == "V"+strconv.Itoa(i)
	}
	result, _ := json.Marshal(map[string]any{"output": output, "committed_offset": committed, "zombie_commit": zombie,
		"stale_generation_commit": generation[0], "current_generation_commit": generation[1], "processed": processed,
		"ok": ok})
	fmt.Printf("RESULT %s\n", result)
	if !ok {
		os.Exit(1)
	}
}
