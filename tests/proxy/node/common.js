// What every scenario shares: its arguments, its JSON-lines output, a quiet logger, one exit path.
//
// A scenario is run as `node SCRIPT.js '{"endpoint": "127.0.0.1:PORT", ...}'` with
// rocketmq-client-nodejs on NODE_PATH (tests/proxy/nodejs.py installs it outside the tree).
// stdout carries one JSON object per line for the test to assert on; the client's own log goes
// to stderr, which the test shows when a scenario fails.
'use strict';

const util = require('node:util');

const args = JSON.parse(process.argv[2] || '{}');

function emit(event, fields) {
  process.stdout.write(JSON.stringify({ event, ...fields }) + '\n');
}

function line(level) {
  return (...parts) => process.stderr.write(`${level} ${util.format(...parts)}\n`);
}

// The client's ILogger (info, warn, error, debug): to stderr instead of ~/logs/rocketmq; its
// debug lines (every receive) only with RMQ_NODE_DEBUG=1 in the environment.
const logger = {
  info: line('INFO'),
  warn: line('WARN'),
  error: line('ERROR'),
  debug: process.env.RMQ_NODE_DEBUG === '1' ? line('DEBUG') : () => {},
};

// The options every client of a scenario starts with: the proxy, credentials when given.
function clientOptions(extra) {
  // A call's deadline is its request timeout (a receive's: plus its await time): 10 s rather
  // than the client's 3 s, so a busy machine (the suite's other tests) is no reason to fail.
  const options = { endpoints: args.endpoint, logger, requestTimeout: 10000, ...extra };
  if (args.accessKey !== undefined) {
    options.sessionCredentials = { accessKey: args.accessKey, accessSecret: args.accessSecret };
  }
  return options;
}

// With args.startupBackoffMs, `client`'s startup waits that long between its attempts to read
// a route (1.0.8 waits 1 s, then 2 s, and has no option for it): for the scenarios whose
// startup is refused, which the test only waits out. The attempts are the client's own.
function withStartupBackoff(client) {
  if (args.startupBackoffMs !== undefined) {
    client.sleep = () => new Promise((resolve) => setTimeout(resolve, args.startupBackoffMs));
  }
  return client;
}

// A message view as the tests compare it.
function viewOf(message) {
  return {
    messageId: message.messageId,
    topic: message.topic,
    body: message.body.toString(),
    tag: message.tag ?? null,
    keys: message.keys,
    messageGroup: message.messageGroup ?? null,
    deliveryAttempt: message.deliveryAttempt ?? null,
    deliveryTimestampMs: message.deliveryTimestamp?.getTime() ?? null,
    properties: Object.fromEntries(message.properties),
  };
}

// Resolves when the test closes the scenario's stdin: the scenario waits there while the test
// looks at the broker.
function stdinClosed() {
  return new Promise((resolve) => {
    process.stdin.on('end', resolve);
    process.stdin.resume();
  });
}

// Start a PushConsumer, say "started", let it consume until the test closes stdin, stop it.
async function consumeUntilStdinCloses(consumer) {
  await consumer.startup();
  emit('started', { clientId: consumer.clientId });
  try {
    await stdinClosed();
  } finally {
    await consumer.shutdown();
  }
}

// The messages and codes of the errors `err` was caused by, outermost first.
function causes(err) {
  const chain = [];
  for (let cause = err.cause; cause; cause = cause.cause) {
    chain.push({ name: cause.name, code: cause.code ?? null, message: String(cause.message) });
  }
  return chain;
}

// Run `scenario`, then exit: 0 once it resolved, 1 (with an "error" line) if it threw. The
// client keeps timers and gRPC channels open after shutdown, so the process exits explicitly.
function run(scenario) {
  scenario().then(
    () => process.exit(0),
    (err) => {
      emit('error', {
        name: err.name,
        code: err.code ?? null,
        message: String(err.message),
        causes: causes(err),  // startup wraps the proxy's answer in two errors
      });
      process.stderr.write(`${err.stack}\n`);
      process.exit(1);
    });
}

module.exports = {
  args, clientOptions, consumeUntilStdinCloses, emit, logger, run, stdinClosed, viewOf,
  withStartupBackoff,
};
