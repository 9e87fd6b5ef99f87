// A consume-transform-produce pipeline with KafkaJS, a zombie and a restart, against any bootstrap address
// (txnspec serve, or a real Kafka broker): the workload and RESULT of serve/java/TxnHarness.java.
//
//   NODE_PATH=<dir with kafkajs> node harness.js <bootstrap> <run-id>
//
// Stock settings: KafkaJS's defaults (no compression, the newest request versions it has, negotiated with
// ApiVersions); only what transactions require is set (transactionalId, idempotent, maxInFlightRequests 1).
//
// 1. an idempotent producer writes 10 input records; 2. instance A (a transactional producer, a member of group
// g-<run>, read_committed being KafkaJS's default) transforms the first 4 in committed transactions with
// sendOffsets; 3. A opens a transaction and writes "zombie"; 4. instance B initialises the same
// transactional id: A's commit must fail; 5. B, with a new member of the group, transforms the rest from the
// committed offset; 6. KIP-447 is not run: KafkaJS's sendOffsets takes a group id only and its TxnOffsetCommit
// is v0-v1 (no generation or member id), so the result says "unsupported"; 7. a read_committed reader reads the
// output. The last line is RESULT {json}; exit 0 when each input is transformed exactly once, no zombie record,
// the group offset at 10 and the zombie fenced.
const { Kafka, logLevel } = require('kafkajs')

const INPUTS = 10
const UNSUPPORTED = 'unsupported: KafkaJS sends offsets by group id only (TxnOffsetCommit v0-v1, no KIP-447)'

const [bootstrap, run] = process.argv.slice(2)
const kafka = new Kafka({ clientId: `kafkajs-${run}`, brokers: [bootstrap], logLevel: logLevel.NOTHING })
const topicIn = `in-${run}`
const topicOut = `out-${run}`
const group = `g-${run}`
const tid = `ctp-${run}`

const transactional = async () => {
  const p = kafka.producer({ transactionalId: tid, idempotent: true, maxInFlightRequests: 1 })
  await p.connect()
  return p
}

const outcome = (e) => (e.type || e.name || String(e))

// Each record is transformed in its own transaction with the consumer's offset; stops after `wanted`.
async function transform (producer, wanted) {
  const consumer = kafka.consumer({ groupId: group, heartbeatInterval: 300 })
  await consumer.connect()
  await consumer.subscribe({ topics: [topicIn], fromBeginning: true })
  let done = 0
  await new Promise((resolve, reject) => {
    const deadline = setTimeout(resolve, 30000)
    consumer.run({
      autoCommit: false,
      eachMessage: async ({ topic, partition, message, pause }) => {
        if (done >= wanted) { pause(); return }
        const txn = await producer.transaction()
        try {
          await txn.send({ topic: topicOut, messages: [{ value: message.value.toString().toUpperCase(), partition: 0 }] })
          await txn.sendOffsets({
            consumerGroupId: group,
            topics: [{ topic, partitions: [{ partition, offset: (BigInt(message.offset) + 1n).toString() }] }]
          })
          await txn.commit()
        } catch (e) {
          await txn.abort().catch(() => {})
          reject(e)
          throw e
        }
        done++
        if (done >= wanted) { clearTimeout(deadline); pause(); resolve() }
      }
    }).catch(reject)
  })
  await consumer.disconnect()
  return done
}

async function readCommitted (want) {
  const reader = kafka.consumer({ groupId: `reader-${run}` })
  await reader.connect()
  await reader.subscribe({ topics: [topicOut], fromBeginning: true })
  const values = []
  await new Promise((resolve) => {
    const deadline = setTimeout(resolve, 15000)
    reader.run({
      eachMessage: async ({ message }) => {
        const value = message.value.toString()
        values.push(value)
        if (value === want) { clearTimeout(deadline); setTimeout(resolve, 1500) }
      }
    })
  })
  await reader.disconnect()
  return values
}

async function main () {
  const admin = kafka.admin()
  await admin.connect()
  await admin.createTopics({ topics: [{ topic: topicIn, numPartitions: 1 }, { topic: topicOut, numPartitions: 1 }] })

  const plain = kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
  await plain.connect()
  for (let i = 0; i < INPUTS; i++) await plain.send({ topic: topicIn, messages: [{ value: `v${i}`, partition: 0 }] })
  await plain.disconnect()

  const a = await transactional()
  let processed = await transform(a, 4)
  const zombieTxn = await a.transaction()
  await zombieTxn.send({ topic: topicOut, messages: [{ value: 'zombie', partition: 0 }] })

  const b = await transactional()
  await (await b.transaction()).abort() // the first transaction() initialises B's producer id: A is fenced
  let zombie = 'committed'
  try {
    await zombieTxn.commit()
  } catch (e) {
    zombie = outcome(e)
  }
  await a.disconnect()

  processed += await transform(b, INPUTS - processed)
  await b.disconnect()

  const output = await readCommitted(`V${INPUTS - 1}`)
  const [offsets] = await admin.fetchOffsets({ groupId: group, topics: [topicIn] })
  const committed = Number(offsets.partitions.find((p) => p.partition === 0).offset)
  await admin.disconnect()

  const sorted = [...output].sort((x, y) => Number(x.slice(1)) - Number(y.slice(1)))
  const expected = Array.from({ length: INPUTS }, (_, i) => `V${i}`)
  const ok = JSON.stringify(sorted) === JSON.stringify(expected) && committed === INPUTS && zombie !== 'committed'
  console.log('RESULT ' + JSON.stringify({
    output,
    committed_offset: committed,
    zombie_commit: zombie,
    stale_generation_commit: UNSUPPORTED,
    current_generation_commit: UNSUPPORTED,
    processed,
    ok
  }))
  process.exit(ok ? 0 : 1)
}

main().catch((e) => {
  console.log('RESULT ' + JSON.stringify({ ok: false, error: `${outcome(e)}: ${e.message}` }))
  process.exit(1)
})
