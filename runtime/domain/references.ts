import { Knex } from 'knex';
import { ErrorDetail, validationError } from '../errors';
import { findAssetForReference } from '../storage/repositories/assetsRepository';
import { findRunForReference } from '../storage/repositories/runsRepository';
import { findSiteForReference } from '../storage/repositories/sitesRepository';
import { findTemplateForReference } from '../storage/repositories/templatesRepository';

/**
 * The resources of this API that a request body may name, each with the read that finds a live
 * one of the organization (another organization's id and a deleted resource find nothing) and
 * locks it until the write commits. A schedule is named only through a run's `occurrenceId`,
 * which runs.ts checks itself, with the same kind of read.
 */
const kinds = {
  site: { noun: 'a site', find: findSiteForReference },
  asset: { noun: 'an asset', find: findAssetForReference },
  run: { noun: 'a run', find: findRunForReference },
  template: { noun: 'a template', find: findTemplateForReference },
} satisfies Record<string, { noun: string; find: (db: Knex, orgId: string, id: string) => Promise<unknown> }>;

export type ReferenceKind = keyof typeof kinds;

/** A field of a request body that names a resource of this API. */
export interface Reference {
  /** JSON pointer of the field in the body, e.g. `/siteId`. */
  pointer: string;
  kind: ReferenceKind;
  /** The id sent; `undefined` (not sent) and `null` (cleared) name nothing and pass. */
  id: string | null | undefined;
  /** On update, the value stored before: re-sending it is not checked again (see checkReferences). */
  unchanged?: string | null;
}

/**
 * Refuses a body whose references do not name live resources of the organization: 400
 * VALIDATION_ERROR with one detail per wrong field, all at once, like schema validation. A
 * missing resource is a fault of the body, not of the addressed resource, hence not 404.
 *
 * A reference is checked when it is written, not kept true afterwards (there is no foreign key):
 * deleting a site or asset leaves the issues, runs, assets and schedules that name it as they are.
 * So an update that re-sends the value already stored is not refused for it (a client may send
 * back a whole resource whose site has since been deleted).
 *
 * The read locks what it finds, and so waits for the organization's write lock first
 * (storage/lentKnex.ts): a delete racing the write is either committed before the read, which then
 * finds nothing (400), or comes after the write, in the feed as in the database. Read without a
 * lock, on Postgres it ran before that lock, and a delete committing in between came before the
 * write in the feed (`site.deleted`, then `asset.created` naming the site).
 */
export async function checkReferences(db: Knex, orgId: string, references: Reference[]): Promise<void> {
  const details: ErrorDetail[] = [];
  for (const { pointer, kind, id, unchanged } of references) {
    if (id === undefined || id === null || id === unchanged) continue;
    const { noun, find } = kinds[kind];
    if (!(await find(db, orgId, id))) details.push({ path: pointer, message: `does not name ${noun} of this organization (got ${id})` });
  }
  const [first] = details;
  if (!first) return;
  const more = details.length > 1 ? ` (and ${details.length - 1} more)` : '';
  throw validationError(`${first.path} ${first.message}${more}`, details);
}
