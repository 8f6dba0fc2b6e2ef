// Preloaded (`node --require`) into an API process that then serves the same compiled code with
// SQLite's group commit reduced to one write transaction per batch: each commits as soon as it
// leaves, as before the group commit (runtime/storage/sqliteGroupCommit.ts; the savepoint each
// write transaction runs in stays). The compiled module reads its batch bound from its exports
// object at every leave, so replacing the export reaches it. For the single-question measurements
// in ../micro/ that compare a server with and without the group commit.
'use strict';
const path = require('node:path');

const groupCommit = require(path.join(__dirname, '..', '..', 'dist', 'runtime', 'storage', 'sqliteGroupCommit.js'));
groupCommit.MAX_BATCH = 1;
