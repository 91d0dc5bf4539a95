// SimpleConsumer: a message received for 60 s is made visible again after 1 s by
// changeInvisibleDuration, comes back, and is acked with its new receipt handle.
'use strict';

const { emit, run } = require('./common');
const { receiveAll, startSimpleConsumer } = require('./simple');

run(async () => {
  const consumer = await startSimpleConsumer();
  try {
    const [ first ] = await receiveAll(consumer, 1, 60000);
    const handle = first.receiptHandle;
    await consumer.changeInvisibleDuration(first, 1000);
    emit('changed', { messageId: first.messageId, newHandle: first.receiptHandle !== handle });
    const again = await receiveAll(consumer, 1, 30000);
    for (const message of again) {
      await consumer.ack(message);
      emit('acked', { messageId: message.messageId });
    }
  } finally {
    await consumer.shutdown();
  }
});
