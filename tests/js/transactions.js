// A KafkaJS transactional producer and read_committed consumer against one broker; prints one JSON line.
// Usage: node transactions.js <host:port> <topic>
const { Kafka, logLevel } = require("kafkajs");

async function main() {
  const t0 = Date.now();
  const [broker, topic] = process.argv.slice(2);
  const kafka = new Kafka({ clientId: "epochlog-test", brokers: [broker], logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 2, replicationFactor: 1 }] });
  await admin.disconnect();

  const producer = kafka.producer({ transactionalId: `js-${topic}`, idempotent: true, maxInFlightRequests: 1 });
  await producer.connect();
  const committed = await producer.transaction();
  await committed.send({ topic, messages: [0, 1, 2, 3].map((i) => ({ value: `commit-${i}`, partition: i % 2 })) });
  await committed.commit();
  const aborted = await producer.transaction();
  await aborted.send({ topic, messages: [0, 1].map((i) => ({ value: `abort-${i}`, partition: i % 2 })) });
  await aborted.abort();
  await producer.disconnect();

  // KafkaJS consumers read committed data by default (readUncommitted: false).
  const seen = [];
  const consumer = kafka.consumer({ groupId: `js-${topic}` });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const done = new Promise((resolve) => {
    consumer.run({
      eachMessage: async ({ message }) => {
        seen.push(message.value.toString());
        if (process.env.DEBUG_JS) console.error(Date.now() - t0, message.value.toString());
        if (seen.filter((v) => v.startsWith("commit-")).length === 4) setTimeout(resolve, 1500);
      },
    });
  });
  await Promise.race([done, new Promise((r) => setTimeout(r, 40000))]);
  await consumer.disconnect();
  console.log(JSON.stringify({ seen: seen.sort(), ms: Date.now() - t0 }));
  process.exit(0); // the race's timer would keep node alive
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
