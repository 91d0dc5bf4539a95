// SimpleConsumer: a message received with a 1 s invisible time and not acked comes back.
'use strict';

const { emit, run } = require('./common');
const { receiveAll, startSimpleConsumer } = require('./simple');

run(async () => {
  const consumer = await startSimpleConsumer();
  try {
    const [ first ] = await receiveAll(consumer, 1, 1000);
    const again = await receiveAll(consumer, 1, 30000);
    for (const message of again) {
      await consumer.ack(message);
      emit('acked', { messageId: message.messageId });
    }
    emit('done', { first: first?.messageId ?? null });
  } finally {
    await consumer.shutdown();
  }
});
