-- allot ledger v22, PostgreSQL: a vendor's bill is kept under the vendor's name, not a
-- hash of its URL and API key (docs/design.md, "Reconciling the vendor's
-- bill"; issue 38). Under the hash, a rotated key or a URL spelled another
-- way started the bill over: every line was read again and every drift
-- item recorded again, the acknowledged ones open once more.
--
-- vendor_account: the vendor's own ID of the account the key bills to, as
-- its bill reports it ('' until one is read): a key of another account is
-- refused rather than mixed into this bill.
ALTER TABLE bill_watermarks ADD COLUMN vendor_account TEXT NOT NULL DEFAULT '';

-- Each hashed account becomes 'vendor:' and the vendor its watermark
-- names. Where one vendor had several (a key rotated before this
-- version), the most recently read one keeps its watermark and lines; the
-- others' lines stay as they were, under their hash, judged; their drift
-- items join the vendor's, one per (line, class), an acknowledged one
-- first.
CREATE TEMP TABLE bill_account_moves AS
    SELECT account AS old_account, 'vendor:' || vendor AS new_account,
           ROW_NUMBER() OVER (PARTITION BY vendor ORDER BY updated_at DESC, account) AS newest
    FROM bill_watermarks WHERE account NOT LIKE 'vendor:%';
DELETE FROM drift_items WHERE id IN (
    SELECT id FROM (
        SELECT d.id, ROW_NUMBER() OVER (PARTITION BY m.new_account, d.line, d.class ORDER BY (d.acked_at IS NULL), d.id) AS n
        FROM drift_items d JOIN bill_account_moves m ON m.old_account = d.account
    ) ranked WHERE n > 1);
UPDATE drift_items SET account = (SELECT new_account FROM bill_account_moves WHERE old_account = drift_items.account)
    WHERE account IN (SELECT old_account FROM bill_account_moves);
UPDATE bill_lines SET account = (SELECT new_account FROM bill_account_moves WHERE old_account = bill_lines.account)
    WHERE account IN (SELECT old_account FROM bill_account_moves WHERE newest = 1);
DELETE FROM bill_watermarks WHERE account IN (SELECT old_account FROM bill_account_moves WHERE newest > 1);
UPDATE bill_watermarks SET account = (SELECT new_account FROM bill_account_moves WHERE old_account = bill_watermarks.account)
    WHERE account IN (SELECT old_account FROM bill_account_moves WHERE newest = 1);
DROP TABLE bill_account_moves;
