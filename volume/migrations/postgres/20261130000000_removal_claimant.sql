-- Who claimed a removal (a crash test in issue 30 found removals cut off by
-- a kill left for a whole lease). A `deleting` row names the data
-- directory of the gateway that marked it (its `claimant` file); a gateway
-- starting on that directory knows none of its removals is running, so it
-- finishes the ones its previous run left at once, while another gateway's
-- stay protected by the lease. NULL on `stored` rows and on removals
-- marked before this column.
ALTER TABLE blobs ADD COLUMN claimant TEXT;
