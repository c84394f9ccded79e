package remote

// Address returns the address that identifies loc's object on this
// Client, the one its Objects' Versions hash: for s3:// the endpoint URL
// followed by /bucket/key; for http(s):// the URL with every X-Amz-* query
// parameter removed (a presigned URL is re-signed with new ones for the
// same object) and other parameters kept, since they may select the
// object. It holds no credential from the Client; an HTTP URL's remaining
// query may still be one (another store's signature), so a cache that
// stores it in the clear must hash it (runtime/diskcache does). Safe for
// concurrent use.
func (c *Client) Address(loc Location) string { return c.versionAddr(loc) }
