import type { Knex } from 'knex';
import { closeWithHandle } from './closeWithHandle';
import type { PgClient } from './pgPipeline';

/**
 * Postgres: the fixed one-row reads outside a transaction — the API key's lookup, a read by id
 * (`selectRows` on the server's own handle, storage/database.ts) — share one connection per
 * handle, pipelined (node-postgres' `pipeline: true`): a read is written at once, whatever is
 * in flight, and Postgres answers in order. Taking a pooled connection per read made every read
 * wait for its own round trip on a backend of its own; one connection that many reads ride
 * measured about 60% more reads per second on this project's 2-core machine (bench/README.md).
 *
 * Each read is still one statement in its own implicit transaction, as on a pooled connection,
 * and sees every write committed before it was sent. Only these point reads ride it: a slow
 * statement here would hold up every read behind it (lists, the feed and everything else use the
 * pool). The connection is made like a pooled one (Knex's settings, search path), lives outside
 * the pool (one more connection per process), is dropped when it fails or ends (the next read
 * opens another; the reads in flight then fail like any read on a broken connection, 503), and is
 * closed with the handle.
 */
export function sharedReadConnection(db: Knex): Promise<PgClient> {
  const client = db.client as unknown as RawConnections;
  let shared = connections.get(client);
  if (shared === undefined) {
    shared = open(client);
    connections.set(client, shared);
    if (!closing.has(client)) {
      closing.add(client);
      closeWithHandle(client, () => closeShared(client));
    }
  }
  return shared;
}

/** Whether `db` is a handle whose point reads ride the shared connection: a Postgres pool's own, not a transaction's. */
export function readsShareAConnection(db: Knex): boolean {
  const client = db.client as { config?: { client?: string }; transacting?: boolean; pool?: unknown };
  return client.config?.client === 'pg' && !client.transacting && client.pool !== undefined && client.pool !== null;
}

/** What this module uses of Knex's Postgres client. */
interface RawConnections {
  acquireRawConnection(): Promise<PgClient>;
  destroyRawConnection(conn: PgClient): Promise<void>;
}

const connections = new WeakMap<RawConnections, Promise<PgClient>>();
const closing = new WeakSet<RawConnections>();

function open(client: RawConnections): Promise<PgClient> {
  const opening = client.acquireRawConnection().then(
    (conn) => {
      const drop = () => {
        if (connections.get(client) !== opening) return;
        connections.delete(client);
        client.destroyRawConnection(conn).catch(() => undefined);
      };
      conn.on('error', drop);
      conn.on('end', drop);
      return conn;
    },
    (err) => {
      // could not connect: the next read tries again
      if (connections.get(client) === opening) connections.delete(client);
      throw err;
    },
  );
  return opening;
}

/** Closes the shared connection of a handle being destroyed (the one open now, if any). */
async function closeShared(client: RawConnections): Promise<void> {
  const shared = connections.get(client);
  connections.delete(client);
  if (shared === undefined) return;
  await shared.then((conn) => client.destroyRawConnection(conn), () => undefined).catch(() => undefined);
}
