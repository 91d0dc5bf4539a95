// PushConsumer: its listener fails the first delivery; the message comes back and succeeds.
// Runs until the test closes stdin (the test sends once the consumer has started).
'use strict';

const { PushConsumer, ConsumeResult } = require('rocketmq-client-nodejs');
const { args, clientOptions, consumeUntilStdinCloses, emit, run, viewOf } = require('./common');

run(async () => {
  let deliveries = 0;
  const consumer = new PushConsumer(clientOptions({
    consumerGroup: args.group,
    subscriptions: new Map([ [ args.topic, '*' ] ]),
    messageListener: {
      consume(message) {
        deliveries += 1;
        const result = deliveries === 1 ? ConsumeResult.FAILURE : ConsumeResult.SUCCESS;
        emit('consumed', { ...viewOf(message), result: result.name });
        return result;
      },
    },
  }));
  await consumeUntilStdinCloses(consumer);
});
