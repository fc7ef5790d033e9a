-- The replication account with exactly the privileges the provider documents as required
-- (docs/connection.md, "Privileges"). The password is for a disposable local server only.
CREATE USER IF NOT EXISTS 'cdc'@'%' IDENTIFIED BY 'cdc-test-pw';
GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'cdc'@'%';
GRANT SELECT, LOCK TABLES ON *.* TO 'cdc'@'%';
