-- Whether a person named the Session (kndl update --title, the view's
-- rename): until one does, its title follows its pull request's.
ALTER TABLE sessions ADD COLUMN titled INTEGER NOT NULL DEFAULT 0;
