// Preloaded (`node --require`) into a second API process of the write scenario, which then serves
// the same compiled code with `recordEvent` replaced by a no-op: no event lock, no event row, no
// delivery look-up. Comparing it with the real API on the same database, phases interleaved,
// gives the throughput cost of recording events. The domain modules call it through the
// module's exports object, so replacing the export reaches every caller outside events.js;
// the write scenario's operation (createLog) is one of them, and the scenario checks that this
// process recorded no event and the real one recorded one per log.
'use strict';
const path = require('node:path');

const events = require(path.join(__dirname, '..', '..', 'dist', 'runtime', 'domain', 'events.js'));
events.recordEvent = async () => undefined;
