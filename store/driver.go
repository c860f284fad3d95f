package store

// Driver is another name of Store, the whole contract of a driver.
type Driver = Store
