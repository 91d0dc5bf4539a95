// Producer: sends args.messages (each delivered args.delayMs from now) to args.topic, one
// "sent" line per receipt with its recall handle, then recalls those at args.recall (indexes),
// one "recalled" line each (or "recall-failed" with the client's error).
'use strict';

const { Producer } = require('rocketmq-client-nodejs');
const { args, clientOptions, emit, run } = require('./common');

run(async () => {
  const producer = new Producer(clientOptions({ topics: [ args.topic ] }));
  await producer.startup();
  emit('started', { clientId: producer.clientId });
  try {
    const receipts = [];
    for (const body of args.messages) {
      const receipt = await producer.send({
        topic: args.topic, body: Buffer.from(body), tag: 'T',
        deliveryTimestamp: new Date(Date.now() + args.delayMs),
      });
      emit('sent', { messageId: receipt.messageId, recallHandle: receipt.recallHandle ?? null });
      receipts.push(receipt);
    }
    for (const index of args.recall) {
      const handle = args.handle ?? receipts[index].recallHandle;
      try {
        const recalled = await producer.recallMessage(args.topic, handle);
        emit('recalled', { messageId: recalled.messageId });
      } catch (err) {
        emit('recall-failed', { message: String(err.message ?? err) });
      }
    }
  } finally {
    await producer.shutdown();
  }
});
