import { idCreatedAt, newId, newIdBatch } from '../runtime/ids';
import { describeEachDatabase } from './support/testApp';

// Ids (runtime/ids.ts; docs/architecture.md, "Representation"): a prefix, then 24 base32
// characters — the creation time in milliseconds, then random — so that new rows land at the end
// of each id index.

const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';
const timeOf = (id: string) => [...id.slice(id.indexOf('_') + 1, id.indexOf('_') + 11)].reduce((ms, c) => ms * 32 + ALPHABET.indexOf(c), 0);

describe('ids', () => {
  afterEach(() => jest.restoreAllMocks());

  it('are the prefix and 24 base32 characters, the first 10 the creation time in milliseconds', () => {
    jest.spyOn(Date, 'now').mockReturnValue(Date.UTC(2026, 10, 23, 12, 0, 0, 123));
    const id = newId('log');
    expect(id).toMatch(/^log_[0-9abcdefghjkmnpqrstvwxyz]{24}$/);
    expect(timeOf(id)).toBe(Date.UTC(2026, 10, 23, 12, 0, 0, 123));
  });

  it('made later sort later, as text', () => {
    const now = jest.spyOn(Date, 'now');
    const made = [0, 1, 31, 32, 1_000, 86_400_000, 365 * 86_400_000].map((later) => {
      now.mockReturnValue(Date.UTC(2026, 0, 1) + later);
      return newId('evt');
    });
    expect([...made].sort()).toEqual(made);
  });

  it('made in the same millisecond differ in their random part', () => {
    jest.spyOn(Date, 'now').mockReturnValue(Date.UTC(2026, 10, 23));
    const ids = Array.from({ length: 20_000 }, () => newId('chk'));
    expect(new Set(ids).size).toBe(ids.length);
    expect(new Set(ids.map((id) => id.slice(0, 14))).size).toBe(1);
  });

  it('tell the server when they were made (idCreatedAt), and nothing for what is not an id of that prefix', () => {
    jest.spyOn(Date, 'now').mockReturnValue(Date.UTC(2026, 9, 1, 8, 30, 0, 7));
    const id = newId('evt');
    expect(idCreatedAt(id, 'evt')).toBe(Date.UTC(2026, 9, 1, 8, 30, 0, 7));
    expect(idCreatedAt(id, 'log')).toBeUndefined();
    for (const bad of ['evt_', `${id}0`, id.slice(0, -1), `${id.slice(0, -1)}u`, `evt-${id.slice(4)}`, `EVT_${id.slice(4)}`, `evt_${id.slice(4).toUpperCase()}`]) {
      expect(idCreatedAt(bad, 'evt')).toBeUndefined();
    }
  });

  it('of a batch share their time and are distinct', () => {
    const batch = newIdBatch('rdg', 500);
    expect(new Set(batch).size).toBe(500);
    expect(new Set(batch.map(timeOf)).size).toBe(1);
    for (const id of batch) expect(id).toMatch(/^rdg_[0-9abcdefghjkmnpqrstvwxyz]{24}$/);
  });
});

describeEachDatabase('ids through the app', (t) => {
  it('a created resource and its event carry the time of the request in their ids', async () => {
    const before = Date.now();
    const site = (await t.http.post('/v1/sites').set('Authorization', t.auth).send({ name: 'Timed' }).expect(201)).body;
    const after = Date.now();
    const [event] = (await t.http.get('/v1/events').query({ resourceId: site.id }).set('Authorization', t.auth).expect(200)).body.data;
    for (const id of [site.id, event.id]) {
      expect(timeOf(id)).toBeGreaterThanOrEqual(before);
      expect(timeOf(id)).toBeLessThanOrEqual(after);
    }
    expect(timeOf(event.id)).toBeGreaterThanOrEqual(timeOf(site.id));
  });
});
