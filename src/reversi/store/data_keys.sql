-- Written for both SQLite and PostgreSQL.
-- Each run's data keys, kept wrapped by a key-encryption key (`data_keys.py`).

-- name: columns
-- What a `DataKeyRow` is read from, in its order.
data_key_id, run_id, kek_id, wrapped, created_at, erased_at

-- name: data_key
SELECT {columns} FROM data_keys WHERE data_key_id = ?

-- name: run_data_keys
SELECT {columns} FROM data_keys WHERE run_id = ? ORDER BY created_at

-- name: insert_data_key
INSERT INTO data_keys ({columns}) VALUES (?, ?, ?, ?, ?, ?)

-- name: data_keys_to_rewrap
-- Live data keys wrapped by one of {keks}, oldest first.
SELECT {columns} FROM data_keys WHERE wrapped IS NOT NULL AND kek_id IN ({keks})
ORDER BY created_at, data_key_id LIMIT ?

-- name: rewrap_data_key
UPDATE data_keys SET kek_id = ?, wrapped = ? WHERE data_key_id = ? AND kek_id = ? AND wrapped IS NOT NULL
RETURNING data_key_id

-- name: erase_data_keys
-- The live data keys of the runs {runs} destroyed.
UPDATE data_keys SET wrapped = NULL, erased_at = ? WHERE run_id IN ({runs}) AND wrapped IS NOT NULL
RETURNING data_key_id

-- name: count_data_keys
-- How many live data keys each KEK wraps, and how many were erased ('').
SELECT CASE WHEN wrapped IS NULL THEN '' ELSE kek_id END, COUNT(*) FROM data_keys
GROUP BY CASE WHEN wrapped IS NULL THEN '' ELSE kek_id END
