// Producer: sends args.messages to args.topic (normal, FIFO with a messageGroup, delayed with a
// deliveryTimestampMs), one "sent" line per receipt; with args.hold, stays up until the test
// closes stdin; args.startupBackoffMs as in common.js.
'use strict';

const { Producer } = require('rocketmq-client-nodejs');
const { args, clientOptions, emit, run, stdinClosed, withStartupBackoff } = require('./common');

function options(message) {
  const fields = { topic: args.topic, body: Buffer.from(message.body) };
  if (message.tag !== undefined) fields.tag = message.tag;
  if (message.keys !== undefined) fields.keys = message.keys;
  if (message.properties !== undefined) fields.properties = new Map(Object.entries(message.properties));
  if (message.messageGroup !== undefined) fields.messageGroup = message.messageGroup;
  if (message.deliveryTimestampMs !== undefined) {
    fields.deliveryTimestamp = new Date(message.deliveryTimestampMs);
  }
  return fields;
}

run(async () => {
  const producer = withStartupBackoff(new Producer(clientOptions({ topics: [ args.topic ] })));
  await producer.startup();
  emit('started', { clientId: producer.clientId });
  try {
    for (const message of args.messages) {
      const receipt = await producer.send(options(message));
      emit('sent', { messageId: receipt.messageId, offset: receipt.offset });
    }
    if (args.hold) {
      await stdinClosed();
    }
  } finally {
    await producer.shutdown();
  }
});
