// A KafkaJS group consumer with a rack id (KIP-392): reads a topic from the beginning until it has <count>
// records or 40 s pass; prints one JSON line of what it read.
// Usage: node rack_reader.js <host:port,...> <topic> <count> <clientId> <rackId>
const { Kafka, logLevel } = require("kafkajs");

async function main() {
  const [brokers, topic, countArg, clientId, rackId] = process.argv.slice(2);
  const count = Number(countArg);
  const kafka = new Kafka({ clientId, brokers: brokers.split(","), logLevel: logLevel.NOTHING });
  const seen = [];
  const consumer = kafka.consumer({ groupId: `${clientId}-${topic}`, rackId });
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
  // Exit once the line is written: a pipe takes it asynchronously, and exiting at once cuts it at 64 KiB.
  process.stdout.write(JSON.stringify({ seen }) + "\n", () => process.exit(0)); // the timer would keep node alive
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
