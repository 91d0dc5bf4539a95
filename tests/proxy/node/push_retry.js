// PushConsumer whose listener fails the first `failFirst` deliveries of each message (all of
// them with failFirst -1), answering FAILURE or, with `throws`, throwing; one "consumed" line
// per delivery with the time it came (ms since the scenario started). Runs until stdin closes.
'use strict';

const { PushConsumer, ConsumeResult } = require('rocketmq-client-nodejs');
const { args, clientOptions, consumeUntilStdinCloses, emit, run, viewOf } = require('./common');

run(async () => {
  const started = process.hrtime.bigint();
  const deliveries = new Map();
  const consumer = new PushConsumer(clientOptions({
    consumerGroup: args.group,
    subscriptions: new Map([ [ args.topic, '*' ] ]),
    messageListener: {
      consume(message) {
        const delivery = (deliveries.get(message.messageId) ?? 0) + 1;
        deliveries.set(message.messageId, delivery);
        const fails = args.failFirst < 0 || delivery <= args.failFirst;
        const result = fails ? (args.throws ? 'THROWN' : 'FAILURE') : 'SUCCESS';
        const atMs = Number(process.hrtime.bigint() - started) / 1e6;
        emit('consumed', { ...viewOf(message), result, atMs });
        if (fails && args.throws) {
          throw new Error(`listener fails delivery ${delivery}`);
        }
        return fails ? ConsumeResult.FAILURE : ConsumeResult.SUCCESS;
      },
    },
  }));
  await consumeUntilStdinCloses(consumer);
});
