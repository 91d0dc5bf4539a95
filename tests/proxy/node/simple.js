// What the SimpleConsumer scenarios share: a started consumer, receiving until enough came.
'use strict';

const { SimpleConsumer } = require('rocketmq-client-nodejs');
const { args, clientOptions, emit, viewOf } = require('./common');

// A SimpleConsumer of args.group on args.topic (tag args.tag, default all), long polls of
// args.awaitMs (the client's default is 30 s).
async function startSimpleConsumer() {
  const consumer = new SimpleConsumer(clientOptions({
    consumerGroup: args.group,
    subscriptions: new Map([ [ args.topic, args.tag ?? '*' ] ]),
    awaitDuration: args.awaitMs,
  }));
  await consumer.startup();
  emit('started', { clientId: consumer.clientId });
  return consumer;
}

// Receive (batches of 32, invisible for `invisibleMs`) until `count` messages came or a minute
// passed (a busy machine); one "received" line per message.
async function receiveAll(consumer, count, invisibleMs) {
  const got = [];
  const deadline = Date.now() + 60000;
  while (got.length < count && Date.now() < deadline) {
    for (const message of await consumer.receive(32, invisibleMs)) {
      emit('received', viewOf(message));
      got.push(message);
    }
  }
  return got;
}

module.exports = { receiveAll, startSimpleConsumer };
