import path from 'node:path';
import type { Plan } from '../lib/load';
import { ROOT, SERVER_ENTRY, SERVER_NODE_OPTIONS } from '../lib/build';
import { startServer, ServerProcess, tsxArgs } from '../lib/processes';
import type { BenchDatabase } from '../lib/database';

export interface Settings {
  quick: boolean;
  /** Postgres base URL when DATABASE_URL names Postgres; the API scenarios then run there. */
  postgresUrl?: string;
  /** Add `--cpu-prof` to every API server (profiles in bench/results/profiles/). */
  profile: boolean;
  /** HTTP scenarios (read, write, query). */
  plan: Plan;
  /** Ingest phases (each is followed by a count check and a reset to the seeded volume). */
  ingestPlan: Plan;
  startRepetitions: number;
  /** Stored readings for the growth comparison (1 million; `--growth=N` to change). */
  growthReadings: number;
  /** `--events-aa`: the write scenario's process "without events" records them too (an A/A check of that comparison). */
  eventsAa: boolean;
  log(line: string): void;
}

/** One line of the results table. */
export interface Measurement {
  scenario: string;
  /** What was measured: `api`, or the baseline's name. */
  subject: string;
  requestsPerSec?: number;
  readingsPerSec?: number;
  p50Ms?: number;
  p99Ms?: number;
  failures?: number;
  peakRssMb?: number;
  startMs?: number;
  /** Name of the baseline (another measurement's `scenario / subject`) and the ratio to it. */
  baseline?: string;
  ratio?: number;
  /** Server CPU time per request (all threads), ms; in-process baselines: the bench's own CPU time per operation. */
  cpuMsPerRequest?: number;
  /** The baseline's CPU time per request over this one's (see load.ts). */
  cpuRatio?: number;
  note?: string;
  /** Every repetition, for the JSON file. */
  detail?: unknown;
}

export interface Target {
  name: string;
  requirement: string;
  measured: string;
  met: boolean;
}

export const PROFILE_DIR = path.join(ROOT, 'bench', 'results', 'profiles');
export const BASELINE_FLOOR = path.join(ROOT, 'bench', 'baselines', 'frameworkFloor.ts');
export const BASELINE_NODE_HTTP = path.join(ROOT, 'bench', 'baselines', 'nodeHttp.ts');
export const BASELINE_PEER = path.join(ROOT, 'bench', 'baselines', 'peer.ts');

/** Server settings for every API process: body limit for 500-reading batches, quiet logs. */
/**
 * How every API server of the bench runs. Rate limits stay on, with the in-process store and a
 * budget the load never reaches: a scenario measures the operation, not 429s, and the limiter's
 * own cost per store is the `limits` scenario's figure (the default store on Postgres would be
 * the Postgres table, which one key's 32 connections queue on).
 */
export const API_ENV = { LOG_LEVEL: 'warn', MAX_BODY_BYTES: String(4 * 1024 * 1024), RATE_LIMIT_STORE: 'memory', RATE_LIMIT_PER_MINUTE: '10000000', RATE_LIMIT_INGEST_BATCHES_PER_MINUTE: '10000000' };

/** `nodeFlags`: more `node` options, e.g. a `--require` preload (see lib/withoutEvents.cjs). */
export function startApi(settings: Settings, db: { serverUrl: string }, label: string, nodeFlags: string[] = []): Promise<ServerProcess> {
  const flags = settings.profile ? ['--cpu-prof', `--cpu-prof-dir=${PROFILE_DIR}`, `--cpu-prof-name=${label}-api.${Date.now()}.cpuprofile`] : [];
  return startServer({ name: `api (${label})`, args: [...SERVER_NODE_OPTIONS, ...flags, ...nodeFlags, SERVER_ENTRY], env: { ...API_ENV, DATABASE_URL: db.serverUrl } });
}

/** The API without its events (lib/withoutEvents.cjs): the other side of the events-cost comparison. */
export const WITHOUT_EVENTS = ['--require', path.join(ROOT, 'bench', 'lib', 'withoutEvents.cjs')];

export function startBaseline(script: string, name: string, floorDb: BenchDatabase): Promise<ServerProcess> {
  return startServer({ name, args: tsxArgs(script), env: { FLOOR_DB: floorDb.file!, FLOOR_ORG_ID: floorDb.orgId, MAX_BODY_BYTES: API_ENV.MAX_BODY_BYTES } });
}

/** The peer (express + express-openapi-validator + Knex) on the API's own database. */
export function startPeer(apiDb: { serverUrl: string }): Promise<ServerProcess> {
  return startServer({ name: 'peer', args: tsxArgs(BASELINE_PEER), env: { PEER_DATABASE_URL: apiDb.serverUrl, MAX_BODY_BYTES: API_ENV.MAX_BODY_BYTES } });
}

/** A JSON request to a server (setup steps, not measured). */
export async function call(url: string, secret: string, method: string, route: string, body?: unknown): Promise<{ status: number; body: any }> {
  const response = await fetch(url + route, {
    method,
    headers: { authorization: `Bearer ${secret}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined };
}

export async function expectStatus(url: string, secret: string, method: string, route: string, status: number, body?: unknown): Promise<any> {
  const response = await call(url, secret, method, route, body);
  if (response.status !== status) {
    throw new Error(`setup ${method} ${route} answered ${response.status}, expected ${status}: ${JSON.stringify(response.body)}`);
  }
  return response.body;
}
