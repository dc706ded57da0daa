import { startKafka } from '../test/helpers/kafka.ts';

// npm run dev:kafka [-- <topic>[:<partitions>] …]: a Kafka-protocol broker on this machine
// without Docker or Java, to try a kafka destination (docs/kafka.md). It is librdkafka's mock
// cluster, the one the tests use (test/helpers/kafka.ts): one broker on a free port of
// 127.0.0.1, messages in memory (5 MiB per partition kept), gone when it stops. Needs gcc and
// librdkafka-dev (Debian), which compile its launcher on first use.

const topics = process.argv.length > 2 ? process.argv.slice(2) : ['edge-traffic'];
const kafka = await startKafka({ topics }).catch((error: Error) => {
  process.stderr.write(`dev:kafka: ${error.message.split('\n')[0]}\n`);
  process.exit(69);
});
const bootstrap = kafka.brokers.join(',');
const names = topics.map((topic) => topic.split(':')[0]);
process.stdout.write(
  `Kafka (librdkafka's mock cluster) at ${bootstrap}; topics: ${names.join(', ')}\n` +
    'A destination for it (the service on this machine):\n' +
    `  npm run cli -- api event_destinations create --target '${JSON.stringify({
      kafka: { brokers: kafka.brokers, topic: names[0] },
    })}'\n` +
    `Read it: kcat -b ${bootstrap} -t ${names[0]} -C -o beginning\n` +
    'Ctrl-C stops it; its messages go with it.\n',
);
await new Promise<void>((resolve) => {
  process.once('SIGINT', resolve);
  process.once('SIGTERM', resolve);
});
await kafka.close();
