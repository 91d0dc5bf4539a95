// Transactions: one message rolled back, one committed, then (args.orphan) one left open for the
// broker's check, which the client's TransactionChecker answers COMMIT over Telemetry.
'use strict';

const { Producer } = require('rocketmq-client-nodejs');
// The package's index does not export the protobuf enums; its generated module does.
const { TransactionResolution } = require('rocketmq-client-nodejs/proto/apache/rocketmq/v2/definition_pb');
const { args, clientOptions, emit, run, stdinClosed } = require('./common');

const checker = {
  async check(message) {
    emit('checked', { messageId: message.messageId, body: message.body.toString() });
    return TransactionResolution.COMMIT;
  },
};

async function sendIn(producer, body) {
  const transaction = producer.beginTransaction();
  const receipt = await producer.send({ topic: args.topic, body: Buffer.from(body) }, transaction);
  return { transaction, receipt };
}

run(async () => {
  const producer = new Producer(clientOptions({ topics: [ args.topic ], checker }));
  await producer.startup();
  try {
    if (args.orphan) {
      const { receipt } = await sendIn(producer, 'decide later');
      emit('sent', { messageId: receipt.messageId, resolution: 'none' });
      await stdinClosed();  // the test waits for the check and the stored message
      return;
    }
    const rolled = await sendIn(producer, 'no');
    await rolled.transaction.rollback();
    emit('sent', { messageId: rolled.receipt.messageId, resolution: 'rollback' });
    const committed = await sendIn(producer, 'yes');
    await committed.transaction.commit();
    emit('sent', { messageId: committed.receipt.messageId, resolution: 'commit' });
  } finally {
    await producer.shutdown();
  }
});
