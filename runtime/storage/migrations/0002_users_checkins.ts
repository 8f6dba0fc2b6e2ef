import { Knex } from 'knex';

/**
 * User profiles and check-ins (docs/architecture.md, "Users and check-ins"). The check-in's geofence verdict is stored,
 * not recomputed on read: it describes the position at the moment it was reported, against the
 * site as it was then. Each list filter has an index ending in `seq`, so a filtered page is an
 * index range scan in list order.
 */
export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('users', (t) => {
    t.increments('seq').primary();
    t.string('id', 40).notNullable().unique();
    t.string('org_id', 40).notNullable().references('id').inTable('organizations');
    t.string('user_id', 200).notNullable();
    t.string('last_location_site_id', 200);
    t.string('last_location_checkin_id', 200);
    t.double('last_location_lat');
    t.double('last_location_lng');
    t.double('last_location_accuracy_meters');
    t.string('last_location_source', 40);
    t.string('last_location_captured_at', 30);
    t.string('created_at', 30).notNullable();
    t.string('updated_at', 30).notNullable();
    // one profile per external identity; also serves the `userId` filter and the check-in refresh
    t.unique(['org_id', 'user_id']);
    t.index(['org_id', 'seq']);
  });

  await knex.schema.createTable('checkins', (t) => {
    t.increments('seq').primary();
    t.string('id', 40).notNullable().unique();
    t.string('org_id', 40).notNullable().references('id').inTable('organizations');
    t.string('user_id', 200).notNullable();
    // deliberately not a foreign key: `siteId` need not name an existing site (docs/architecture.md, "Users and check-ins")
    t.string('site_id', 200).notNullable();
    t.string('status', 20).notNullable();
    t.string('arrival_window_start_at', 30);
    t.string('arrival_window_end_at', 30);
    t.double('latitude');
    t.double('longitude');
    t.double('accuracy_meters');
    t.string('check_in_address', 500);
    t.string('check_out_address', 500);
    t.string('checked_in_at', 30);
    t.string('checked_out_at', 30);
    t.double('distance_from_site_meters');
    t.boolean('within_geofence');
    t.boolean('suspicious');
    t.text('suspicion_reasons'); // JSON array of codes, or null when there is no verdict
    t.string('created_at', 30).notNullable();
    t.string('updated_at', 30).notNullable();
    t.index(['org_id', 'seq']);
    t.index(['org_id', 'user_id', 'seq']);
    t.index(['org_id', 'site_id', 'seq']);
    t.index(['org_id', 'status', 'seq']);
  });
}
