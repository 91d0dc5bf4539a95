// SimpleConsumer: receive args.count messages, ack each, then one more receive finds nothing
// (unless args.after is false).
'use strict';

const { args, emit, run } = require('./common');
const { receiveAll, startSimpleConsumer } = require('./simple');

run(async () => {
  const consumer = await startSimpleConsumer();
  try {
    for (const message of await receiveAll(consumer, args.count, 30000)) {
      await consumer.ack(message);
      emit('acked', { messageId: message.messageId });
    }
    if (args.after !== false) {
      const after = await consumer.receive(32, 30000);
      emit('after', { messageIds: after.map((m) => m.messageId) });
    }
  } finally {
    await consumer.shutdown();
  }
});
