// A KafkaJS producer (acks=all) and group consumer against a cluster; prints one JSON line.
// Usage: node produce_consume.js <host:port,...> <topic> <count>
const { Kafka, logLevel } = require("kafkajs");

async function main() {
  const t0 = Date.now();
  const [brokers, topic, countArg] = process.argv.slice(2);
  const count = Number(countArg);
  const kafka = new Kafka({ clientId: "epochlog-smoke", brokers: brokers.split(","), logLevel: logLevel.NOTHING });

  const producer = kafka.producer();
  await producer.connect();
  const values = Array.from({ length: count }, (_, i) => `v-${i}`);
  const acks = await producer.send({ topic, acks: -1, messages: values.map((value) => ({ value, partition: 0 })) });
  await producer.disconnect();

  const seen = [];
  const consumer = kafka.consumer({ groupId: `smoke-${topic}` });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const done = new Promise((resolve) => {
    consumer.run({
      eachMessage: async ({ message }) => {
        seen.push({ offset: Number(message.offset), value: message.value.toString() });
        if (seen.length >= count) resolve();
      },
    });
  });
  await Promise.race([done, new Promise((r) => setTimeout(r, 40000))]);
  await consumer.disconnect();
  console.log(JSON.stringify({ acks, seen, ms: Date.now() - t0 }));
  process.exit(0); // the race's timer would keep node alive
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
