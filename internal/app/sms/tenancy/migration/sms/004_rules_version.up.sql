-- One counter of changes to the rules: every statement that writes a table
-- the rules snapshot is read from adds one, in its own transaction. A reader
-- that holds a snapshot and the version it was read at can then tell, with
-- one primary-key read, whether the snapshot is still the rules as
-- committed (tenancy.Cache).
CREATE TABLE sms_rules_version (
    id      smallint PRIMARY KEY CHECK (id = 1),
    version bigint   NOT NULL
);
INSERT INTO sms_rules_version (id, version) VALUES (1, 1);

CREATE FUNCTION sms_rules_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE sms_rules_version SET version = version + 1 WHERE id = 1;
    RETURN NULL;
END
$$;

CREATE TRIGGER sms_rules_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON sms_carrier
    FOR EACH STATEMENT EXECUTE FUNCTION sms_rules_changed();
CREATE TRIGGER sms_rules_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON sms_number_segment
    FOR EACH STATEMENT EXECUTE FUNCTION sms_rules_changed();
CREATE TRIGGER sms_rules_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON sms_enterprise
    FOR EACH STATEMENT EXECUTE FUNCTION sms_rules_changed();
CREATE TRIGGER sms_rules_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON sms_app
    FOR EACH STATEMENT EXECUTE FUNCTION sms_rules_changed();
CREATE TRIGGER sms_rules_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON sms_channel
    FOR EACH STATEMENT EXECUTE FUNCTION sms_rules_changed();
CREATE TRIGGER sms_rules_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON sms_signature
    FOR EACH STATEMENT EXECUTE FUNCTION sms_rules_changed();
CREATE TRIGGER sms_rules_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON sms_signature_registration
    FOR EACH STATEMENT EXECUTE FUNCTION sms_rules_changed();
CREATE TRIGGER sms_rules_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON sms_template
    FOR EACH STATEMENT EXECUTE FUNCTION sms_rules_changed();
CREATE TRIGGER sms_rules_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON sms_blacklist
    FOR EACH STATEMENT EXECUTE FUNCTION sms_rules_changed();
CREATE TRIGGER sms_rules_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON sms_channel_group
    FOR EACH STATEMENT EXECUTE FUNCTION sms_rules_changed();
CREATE TRIGGER sms_rules_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON sms_channel_group_member
    FOR EACH STATEMENT EXECUTE FUNCTION sms_rules_changed();
CREATE TRIGGER sms_rules_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON sms_route
    FOR EACH STATEMENT EXECUTE FUNCTION sms_rules_changed();
CREATE TRIGGER sms_rules_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON sms_price
    FOR EACH STATEMENT EXECUTE FUNCTION sms_rules_changed();
CREATE TRIGGER sms_rules_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON sms_frequency_limit
    FOR EACH STATEMENT EXECUTE FUNCTION sms_rules_changed();
